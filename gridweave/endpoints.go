package gridweave

import "gridweave.dev/gridweave/endpoints"

// GPUProductLabel is the node label naming a node's GPU product (NVIDIA's
// GPU feature discovery sets it), which an endpoint's hardware selects.
const GPUProductLabel = endpoints.GPUProductLabel
