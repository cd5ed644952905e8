// Package endpoints moves a GridweaveEndpoint to the hardware its spec
// names: the endpoint's RayCluster gets a worker group on the new
// hardware (GroupName: ep-<name>-<gpu type>-x<gpus>) in the same update
// that removes the old one (rayctl's swap: the head and the other groups
// untouched), and the endpoint's status records the new group and
// hardware. Endpoints is a typed client of the CRD over the dynamic
// client.
package endpoints
