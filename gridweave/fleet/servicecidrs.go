package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KubeServiceCIDRs is ServiceRanges over the Kubernetes ServiceCIDR API
// (networking.k8s.io/v1, served since Kubernetes 1.33): every range of
// every ServiceCIDR object, the "kubernetes" default one included. An API
// server that does not serve it answers none.
type KubeServiceCIDRs struct {
	Client kubernetes.Interface
}

// ServiceCIDRs implements ServiceRanges.
func (k KubeServiceCIDRs) ServiceCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	list, err := k.Client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // before Kubernetes 1.33
	}
	if err != nil {
		return nil, fmt.Errorf("read the cluster's service CIDRs: %w", err)
	}
	var out []netip.Prefix
	for _, sc := range list.Items {
		for _, c := range sc.Spec.CIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return nil, fmt.Errorf("ServiceCIDR %s: %q is not a CIDR", sc.Name, c)
			}
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// serviceRangesTTL is how long the fleet keeps the service ranges it read
// before reading them again.
const serviceRangesTTL = 5 * time.Minute

// readServiceRanges reads the cluster's Service ranges when they were not
// read within serviceRangesTTL, and makes them master prefixes. It is
// called before a pod CIDR is recorded: a range the fleet cannot read is
// an error, not a pod CIDR let through unchecked.
func (s *Service) readServiceRanges(ctx context.Context) error {
	if s.services == nil {
		return nil
	}
	s.foreignMu.Lock()
	fresh := !s.servicesRead.IsZero() && s.now().Sub(s.servicesRead) < serviceRangesTTL
	s.foreignMu.Unlock()
	if fresh {
		return nil
	}
	ranges, err := s.services.ServiceCIDRs(ctx)
	if err != nil {
		return err
	}
	s.foreignMu.Lock()
	defer s.foreignMu.Unlock()
	s.servicesRead = s.now()
	if slices.Equal(ranges, s.serviceRanges) {
		return nil
	}
	s.serviceRanges = ranges
	return s.pushMasterPrefixesLocked()
}
