package kubeletjoin

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// A Node's credential and the kubelet's serving certificate, as
// Kubernetes names them.
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
	bootstrapUser  = "system:bootstrap:"
)

// Decision is what Review made of a certificate signing request.
type Decision string

const (
	// Approved: a request the master decided, approved.
	Approved Decision = "approved"
	// Denied: a request of one of the fleet's machines that asks for
	// more than the master decided, denied.
	Denied Decision = "denied"
	// NotOurs: a request of another of the cluster's clients, or a
	// renewal, left to its approver.
	NotOurs Decision = "not ours"
	// Decided: a request already approved or denied.
	Decided Decision = "decided already"
)

// Machine is what the master decided of a machine of the fleet.
type Machine struct {
	// Address is its VPN address; Binding ties its bootstrap tokens to it
	// (NodeGroup).
	Address netip.Addr
	Binding string
}

// Approver approves the kubelet certificates the master decided.
type Approver struct {
	Client kubernetes.Interface
	// Machine returns the machine hostname when the fleet holds it
	// (validated or registered); ok is false otherwise.
	Machine func(ctx context.Context, hostname string) (m Machine, ok bool, err error)
	// Logger receives a line per decision; default discards.
	Logger *slog.Logger
}

// Run reviews every request there is and every request made, until ctx
// ends.
func (a *Approver) Run(ctx context.Context) error {
	log := a.logger()
	csrs := a.Client.CertificatesV1().CertificateSigningRequests()
	for ctx.Err() == nil {
		list, err := csrs.List(ctx, metav1.ListOptions{})
		if err != nil {
			log.WarnContext(ctx, "listing certificate signing requests", "err", err)
			sleep(ctx, 2*time.Second)
			continue
		}
		for i := range list.Items {
			a.review(ctx, &list.Items[i])
		}
		w, err := csrs.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			log.WarnContext(ctx, "watching certificate signing requests", "err", err)
			sleep(ctx, 2*time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				a.review(ctx, csr)
			}
		}
		w.Stop()
	}
	return nil
}

func (a *Approver) review(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) {
	d, reason, err := a.Review(ctx, csr)
	if err != nil {
		a.logger().WarnContext(ctx, "reviewing a certificate signing request", "csr", csr.Name, "err", err)
		return
	}
	if d == Approved || d == Denied {
		a.logger().InfoContext(ctx, "kubelet certificate "+string(d), "csr", csr.Name, "signer", csr.Spec.SignerName, "user", csr.Spec.Username, "reason", reason)
	}
}

// Review decides csr and, when it is the fleet's, approves or denies it
// in the API server. reason says why.
func (a *Approver) Review(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (Decision, string, error) {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return Decided, "", nil
		}
	}
	d, reason, err := a.decide(ctx, csr)
	if err != nil || (d != Approved && d != Denied) {
		return d, reason, err
	}
	cond := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "GridweaveApproved", Message: reason, LastUpdateTime: metav1.Now()}
	if d == Denied {
		cond.Type, cond.Reason = certificatesv1.CertificateDenied, "GridweaveDenied"
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, cond)
	if _, err := a.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return d, reason, fmt.Errorf("kubeletjoin: %s %s: %w", d, csr.Name, err)
	}
	return d, reason, nil
}

// decide is Review's judgement, without writing it.
func (a *Approver) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (Decision, string, error) {
	switch csr.Spec.SignerName {
	case certificatesv1.KubeAPIServerClientKubeletSignerName:
		if !strings.HasPrefix(csr.Spec.Username, bootstrapUser) || !slices.Contains(csr.Spec.Groups, BootstrapGroup) {
			return NotOurs, "not a request of a Gridweave bootstrap token", nil
		}
		hostname, binding, err := tokenMachine(csr.Spec.Groups)
		if err != nil {
			return Denied, err.Error(), nil
		}
		if m, ok, err := a.Machine(ctx, hostname); err != nil {
			return "", "", err
		} else if !ok || m.Binding != binding {
			// A token of another master of this cluster, or of a machine
			// released since: not this fleet's to decide.
			return NotOurs, "the fleet holds no machine " + hostname + " of this token", nil
		}
		req, err := parseRequest(csr.Spec.Request)
		if err != nil {
			return Denied, err.Error(), nil
		}
		if err := checkSubject(req, hostname); err != nil {
			return Denied, err.Error(), nil
		}
		if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
			return Denied, "a kubelet's client certificate names no address", nil
		}
		if err := checkUsages(csr.Spec.Usages, certificatesv1.UsageClientAuth); err != nil {
			return Denied, err.Error(), nil
		}
		return Approved, "the client certificate of " + hostname + ", asked for with the token made for it", nil

	case certificatesv1.KubeletServingSignerName:
		hostname, ok := strings.CutPrefix(csr.Spec.Username, nodeUserPrefix)
		if !ok || !slices.Contains(csr.Spec.Groups, nodesGroup) {
			return NotOurs, "not a Node's request", nil
		}
		m, ok, err := a.Machine(ctx, hostname)
		if err != nil {
			return "", "", err
		}
		if !ok {
			return NotOurs, "not a Node of the fleet", nil
		}
		addr := m.Address
		req, err := parseRequest(csr.Spec.Request)
		if err != nil {
			return Denied, err.Error(), nil
		}
		if err := checkSubject(req, hostname); err != nil {
			return Denied, err.Error(), nil
		}
		for _, ip := range req.IPAddresses {
			if got, ok := netip.AddrFromSlice(ip); !ok || got.Unmap() != addr {
				return Denied, fmt.Sprintf("the address %s is not %s's (%s)", ip, hostname, addr), nil
			}
		}
		for _, name := range req.DNSNames {
			if name != hostname {
				return Denied, fmt.Sprintf("the name %q is not %s's", name, hostname), nil
			}
		}
		if len(req.EmailAddresses)+len(req.URIs) > 0 || len(req.IPAddresses)+len(req.DNSNames) == 0 {
			return Denied, "a serving certificate names the node's address and name, and nothing else", nil
		}
		if err := checkUsages(csr.Spec.Usages, certificatesv1.UsageServerAuth); err != nil {
			return Denied, err.Error(), nil
		}
		return Approved, fmt.Sprintf("the serving certificate of %s at %s", hostname, addr), nil
	}
	return NotOurs, "another signer", nil
}

// tokenMachine is the machine a Gridweave token was made for, and the
// binding to it, from the groups the API server gave its request.
func tokenMachine(groups []string) (hostname, binding string, err error) {
	var found []string
	for _, g := range groups {
		if rest, ok := strings.CutPrefix(g, BootstrapGroup+":node:"); ok {
			found = append(found, rest)
		}
	}
	if len(found) != 1 {
		return "", "", fmt.Errorf("the token names %d machines, not one", len(found))
	}
	i := strings.LastIndexByte(found[0], ':')
	if i <= 0 {
		return "", "", fmt.Errorf("the token's machine group %q has no binding", found[0])
	}
	return found[0][:i], found[0][i+1:], nil
}

func parseRequest(raw []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("the request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("the request's signature: %w", err)
	}
	return req, nil
}

// checkSubject: the certificate is the Node hostname's, of the nodes'
// group, and nothing more.
func checkSubject(req *x509.CertificateRequest, hostname string) error {
	if req.Subject.CommonName != nodeUserPrefix+hostname {
		return fmt.Errorf("the certificate is asked for %q, not %s%s", req.Subject.CommonName, nodeUserPrefix, hostname)
	}
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return fmt.Errorf("the certificate's groups are %v, not [%s]", req.Subject.Organization, nodesGroup)
	}
	return nil
}

// checkUsages: the usages need, and no others than a key's.
func checkUsages(usages []certificatesv1.KeyUsage, need certificatesv1.KeyUsage) error {
	if !slices.Contains(usages, need) {
		return fmt.Errorf("the usages %v lack %s", usages, need)
	}
	for _, u := range usages {
		if u != need && u != certificatesv1.UsageDigitalSignature && u != certificatesv1.UsageKeyEncipherment {
			return fmt.Errorf("the usage %q is not a kubelet's", u)
		}
	}
	return nil
}

func (a *Approver) logger() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
