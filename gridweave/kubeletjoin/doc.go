// Package kubeletjoin is the master's side of the kubelet join mode
// (Config.KubeJoinMode "kubelet"), in which a machine's own kubelet joins a
// conformant control plane by TLS bootstrapping, through its tunnel.
//
// Tokens issues the bootstrap token a validate answer carries: a
// bootstrap.kubernetes.io/token Secret in kube-system, short-lived, whose
// extra groups are the fleet's (BootstrapGroup, which the deploy files
// let create certificate signing requests) and the machine's own
// (NodeGroup): the API server names that group in every request the token
// makes, so a request says which machine made it and no machine can say
// otherwise.
//
// Approver approves the certificates the kubelets ask for, and only those
// the master decided: a first client certificate (signer
// kubernetes.io/kube-apiserver-client-kubelet) whose name is the machine's
// the token was made for, and a serving certificate (signer
// kubernetes.io/kubelet-serving) of a Node the fleet holds, for its VPN
// address and name alone. A request of one of the fleet's machines that
// asks for more is denied; the cluster's other requests (of machines the
// fleet does not hold among them) are left to their approvers. Renewals of a client certificate, which name the node that
// asks, are approved by the controller-manager (the selfnodeclient
// binding kubeadm makes too).
package kubeletjoin
