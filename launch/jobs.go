package launch

import (
	"context"
	"fmt"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/rayctl/dashboard"
)

// Dashboard is a client of the Ray dashboard of RayCluster cluster (or of
// the RayJob of that name's cluster): at dashboardURL when given, else
// through the API server's service proxy to the head service's dashboard
// port, so no port-forward is needed.
func (s *Session) Dashboard(ctx context.Context, namespace, cluster, dashboardURL string) (*dashboard.Client, error) {
	if dashboardURL != "" {
		return dashboard.New(dashboardURL, nil)
	}
	if s.restConfig == nil {
		return nil, fmt.Errorf("launch: no dashboard URL and no API server to proxy through")
	}
	head, err := s.headService(ctx, namespace, cluster)
	if err != nil {
		return nil, err
	}
	return dashboard.New(DashboardProxyURL(s.restConfig.Host, namespace, head), &dashboard.Options{HTTPClient: s.httpClient})
}

// DashboardProxyURL is the API server's service proxy to a head service's
// dashboard port.
func DashboardProxyURL(apiServer, namespace, headService string) string {
	return fmt.Sprintf("%s/api/v1/namespaces/%s/services/%s:dashboard/proxy", apiServer, url.PathEscape(namespace), url.PathEscape(headService))
}

// headService is the head service of RayCluster cluster, or of the
// cluster of the RayJob called cluster.
func (s *Session) headService(ctx context.Context, namespace, cluster string) (string, error) {
	rc, err := s.Ray.RayV1().RayClusters(namespace).Get(ctx, cluster, metav1.GetOptions{})
	if err != nil {
		job, jerr := s.Ray.RayV1().RayJobs(namespace).Get(ctx, cluster, metav1.GetOptions{})
		if jerr != nil || job.Status.RayClusterName == "" {
			return "", fmt.Errorf("no RayCluster or RayJob %s/%s with a cluster: %w", namespace, cluster, err)
		}
		if rc, err = s.Ray.RayV1().RayClusters(namespace).Get(ctx, job.Status.RayClusterName, metav1.GetOptions{}); err != nil {
			return "", err
		}
	}
	if rc.Status.Head.ServiceName != "" {
		return rc.Status.Head.ServiceName, nil
	}
	return rc.Name + "-head-svc", nil
}
