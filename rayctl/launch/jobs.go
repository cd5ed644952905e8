package launch

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl/dashboard"
	"gridweave.dev/rayctl/operatorbuild"
)

// Dashboard is a client of the Ray dashboard of RayCluster cluster (or of
// the RayJob of that name's cluster): at dashboardURL when given, else
// through the API server's service proxy to the head service's dashboard
// port, so no port-forward is needed. A cluster with token
// authentication (authOptions mode token) is sent its token: RAY_AUTH_TOKEN
// when set, else the one in the Secret KubeRay keeps it in — through the
// proxy, or to a dashboardURL over https or on loopback (never in clear
// text to another host).
func (s *Session) Dashboard(ctx context.Context, namespace, cluster, dashboardURL string) (*dashboard.Client, error) {
	if dashboardURL != "" {
		token := os.Getenv("RAY_AUTH_TOKEN")
		if token == "" && cluster != "" && s.restConfig != nil {
			token = s.tokenForURL(ctx, namespace, cluster, dashboardURL)
		}
		return dashboard.New(dashboardURL, &dashboard.Options{Token: token})
	}
	if s.restConfig == nil {
		return nil, fmt.Errorf("launch: no dashboard URL and no API server to proxy through")
	}
	rc, err := s.rayCluster(ctx, namespace, cluster)
	if err != nil {
		return nil, err
	}
	token := os.Getenv("RAY_AUTH_TOKEN")
	if token == "" {
		if token, err = s.authToken(ctx, rc); err != nil {
			return nil, err
		}
	}
	return dashboard.New(DashboardProxyURL(s.restConfig.Host, namespace, headServiceName(rc)), &dashboard.Options{HTTPClient: s.httpClient, Token: token})
}

// tokenForURL is the token of cluster for a dashboard at a URL the user
// gave: "" (said why) when the cluster or its Secret cannot be read, or
// when the URL would carry it in clear text to another host.
func (s *Session) tokenForURL(ctx context.Context, namespace, cluster, dashboardURL string) string {
	rc, err := s.rayCluster(ctx, namespace, cluster)
	if err != nil {
		s.say("calling %s without a Ray token: %v", dashboardURL, err)
		return ""
	}
	token, err := s.authToken(ctx, rc)
	if err != nil {
		s.say("calling %s without a Ray token: %v", dashboardURL, err)
		return ""
	}
	if token != "" && !privateTransport(dashboardURL) {
		s.say("calling %s without RayCluster %s/%s's token: plain HTTP to another host would carry it in clear text; use https, a loopback port-forward, or set RAY_AUTH_TOKEN", dashboardURL, rc.Namespace, rc.Name)
		return ""
	}
	return token
}

// privateTransport reports whether a URL's requests are encrypted or stay
// on this machine: https, or a loopback host.
func privateTransport(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	if u.Scheme == "https" {
		return true
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DashboardProxyURL is the API server's service proxy to a head service's
// dashboard port.
func DashboardProxyURL(apiServer, namespace, headService string) string {
	return fmt.Sprintf("%s/api/v1/namespaces/%s/services/%s:dashboard/proxy", apiServer, url.PathEscape(namespace), url.PathEscape(headService))
}

// rayCluster is RayCluster cluster, or the cluster of the RayJob called
// cluster.
func (s *Session) rayCluster(ctx context.Context, namespace, cluster string) (*rayv1.RayCluster, error) {
	rc, err := s.Ray.RayV1().RayClusters(namespace).Get(ctx, cluster, metav1.GetOptions{})
	if err == nil {
		return rc, nil
	}
	job, jerr := s.Ray.RayV1().RayJobs(namespace).Get(ctx, cluster, metav1.GetOptions{})
	if jerr != nil || job.Status.RayClusterName == "" {
		return nil, fmt.Errorf("no RayCluster or RayJob %s/%s with a cluster: %w", namespace, cluster, err)
	}
	return s.Ray.RayV1().RayClusters(namespace).Get(ctx, job.Status.RayClusterName, metav1.GetOptions{})
}

// authToken is the Ray token of a cluster with token authentication
// (KubeRay's Secret: authOptions.secretName, else the cluster's name as
// KubeRay shortens it, key auth_token), "" for a cluster without, or one
// that takes Kubernetes tokens (no Secret then).
func (s *Session) authToken(ctx context.Context, rc *rayv1.RayCluster) (string, error) {
	a := rc.Spec.AuthOptions
	if a == nil || a.Mode != rayv1.AuthModeToken || ptr.Deref(a.EnableK8sTokenAuth, false) {
		return "", nil
	}
	name := operatorbuild.CheckedName(rc.Name)
	if a.SecretName != nil && *a.SecretName != "" {
		name = *a.SecretName
	}
	secret, err := s.Kube.CoreV1().Secrets(rc.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("RayCluster %s/%s asks for a token, and its Secret %s: %w", rc.Namespace, rc.Name, name, err)
	}
	token := string(secret.Data["auth_token"])
	if token == "" {
		return "", fmt.Errorf("RayCluster %s/%s asks for a token, and its Secret %s has no auth_token", rc.Namespace, rc.Name, name)
	}
	return token, nil
}

// headServiceName is the name of a RayCluster's head Service.
func headServiceName(rc *rayv1.RayCluster) string {
	if rc.Status.Head.ServiceName != "" {
		return rc.Status.Head.ServiceName
	}
	return rc.Name + "-head-svc"
}
