package operatorbuild

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// HeadService is the head Service the operator makes for a RayCluster
// (common/service.go BuildServiceForHeadPod): headless by default, the
// head container's ports (or the operator's defaults) with metrics,
// selecting the head pod by the operator's labels (labels may give their
// values). A headService in the spec is taken as the base, its selector
// replaced.
func HeadService(cluster rayv1.RayCluster, labels, annotations map[string]string) *corev1.Service {
	defaults := map[string]string{
		ClusterLabel:    cluster.Name,
		NodeTypeLabel:   string(rayv1.HeadNode),
		IdentifierLabel: identifier(cluster.Name, rayv1.HeadNode),
		AppNameLabel:    appName,
		CreatedByLabel:  componentName,
	}
	selector := map[string]string{}
	for k, v := range defaults {
		if given, ok := labels[k]; ok {
			v = given
		}
		selector[k] = v
	}
	serviceLabels := maps.Clone(selector)
	if annotations == nil {
		annotations = map[string]string{}
	}
	name := headServiceName(RayCluster, cluster.Spec, cluster.Name)
	serviceType := cluster.Spec.HeadGroupSpec.ServiceType
	protocol := "tcp"
	var ports []corev1.ServicePort
	for name, port := range servicePorts(cluster) {
		ports = append(ports, corev1.ServicePort{Name: name, Port: port, AppProtocol: &protocol})
	}
	sortPorts(ports)
	if given := cluster.Spec.HeadGroupSpec.HeadService; given != nil {
		svc := given.DeepCopy()
		svc.Spec.Selector = selector
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		maps.Copy(svc.Annotations, annotations)
		svc.Spec.Ports = append(svc.Spec.Ports, ports...)
		completeGivenService(svc, serviceLabels, name, cluster.Namespace, serviceType)
		return svc
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace, Labels: serviceLabels, Annotations: annotations},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports, Type: serviceType},
	}
	if serviceType == "" || serviceType == corev1.ServiceTypeClusterIP {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.PublishNotReadyAddresses = true
	}
	return svc
}

// HeadServiceForRayJob is the head Service a RayJob keeps pointed at the
// cluster it runs on (common/job.go BuildHeadServiceForRayJob): the
// cluster's, named and labelled after the job.
func HeadServiceForRayJob(job rayv1.RayJob, cluster rayv1.RayCluster) *corev1.Service {
	return ownersHeadService(HeadService(cluster, nil, nil), RayJob, job.Name, job.Namespace)
}

// HeadServiceForRayService is the head Service a RayService keeps
// pointed at the cluster that serves (common/service.go
// BuildHeadServiceForRayService).
func HeadServiceForRayService(service rayv1.RayService, cluster rayv1.RayCluster) *corev1.Service {
	return ownersHeadService(HeadService(cluster, nil, nil), RayService, service.Name, service.Namespace)
}

func ownersHeadService(svc *corev1.Service, kind CRD, owner, namespace string) *corev1.Service {
	svc.Name = headServiceName(kind, rayv1.RayClusterSpec{}, owner)
	svc.Namespace = namespace
	svc.Labels = map[string]string{
		OriginatedFromCRLabel:  owner,
		OriginatedFromCRDLabel: string(kind),
		NodeTypeLabel:          string(rayv1.HeadNode),
		IdentifierLabel:        identifier(owner, rayv1.HeadNode),
	}
	return svc
}

// ErrNoServePort is what ServeService answers for a head container that
// declares ports but none named serve (or serve-…): the operator then
// builds no serve Service.
var ErrNoServePort = errors.New("the Ray head container declares no port named serve (or serve-…): the operator creates no serve Service")

// ServeService is the Service in front of the pods that serve
// (common/service.go BuildServeService): a RayService's (forService)
// selects its cluster's serving pods, a RayCluster's (with the
// ray.io/enable-serve-service annotation) all of its pods. Its ports are
// the head container's serve ports; a RayService's own serveService is
// taken as the base.
func ServeService(service rayv1.RayService, cluster rayv1.RayCluster, forService bool) (*corev1.Service, error) {
	name, namespace, kind := cluster.Name, cluster.Namespace, RayCluster
	if forService {
		name, namespace, kind = service.Name, service.Namespace, RayService
	}
	labels := map[string]string{
		OriginatedFromCRLabel:  name,
		OriginatedFromCRDLabel: string(kind),
		ServeLabel:             name + "-serve",
	}
	selector := map[string]string{ClusterLabel: cluster.Name}
	if forService {
		selector[ServeLabel] = "true"
	}
	serviceName := name + "-serve-svc"
	serviceType := cluster.Spec.HeadGroupSpec.ServiceType
	if forService {
		serviceType = service.Spec.RayClusterSpec.HeadGroupSpec.ServiceType
	}
	var ports []corev1.ServicePort
	for name, port := range servicePorts(cluster) {
		if name == ServingPortName || strings.HasPrefix(name, ServingPortName+"-") {
			ports = append(ports, corev1.ServicePort{Name: name, Port: port})
		}
	}
	sortPorts(ports)
	if forService && service.Spec.ServeService != nil {
		svc := service.Spec.ServeService.DeepCopy()
		svc.Spec.Selector = selector
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		if len(ports) > 0 {
			given := map[string]corev1.ServicePort{}
			for _, p := range svc.Spec.Ports {
				given[p.Name] = p
			}
			merged := make([]corev1.ServicePort, 0, len(ports))
			for _, p := range ports {
				if g, ok := given[p.Name]; ok {
					p = g
				}
				merged = append(merged, p)
			}
			svc.Spec.Ports = merged
		}
		completeGivenService(svc, labels, serviceName, namespace, serviceType)
		return svc, nil
	}
	if len(ports) == 0 {
		return nil, ErrNoServePort
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName, Namespace: namespace, Labels: labels},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports, Type: serviceType},
	}, nil
}

// completeGivenService fills in a Service the spec gives: the operator's
// labels over the user's, its name unless given, the owner's namespace
// always, the type unless given.
func completeGivenService(svc *corev1.Service, labels map[string]string, name, namespace string, serviceType corev1.ServiceType) {
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	maps.Copy(svc.Labels, labels)
	if svc.Name == "" {
		svc.Name = name
	}
	svc.Namespace = namespace
	if svc.Spec.Type == "" {
		svc.Spec.Type = serviceType
	}
}

// sortPorts orders ports by name. (The operator builds them from a map:
// it sorts the head Service's it makes itself, and leaves the others in
// the map's order.)
func sortPorts(ports []corev1.ServicePort) {
	slices.SortStableFunc(ports, func(a, b corev1.ServicePort) int { return cmp.Compare(a.Name, b.Name) })
}

// servicePorts are the head container's ports by name (a nameless one
// named after its number), or the operator's defaults when it declares
// none; metrics (8080) is always there.
func servicePorts(cluster rayv1.RayCluster) map[string]int32 {
	ports := map[string]int32{}
	for _, p := range cluster.Spec.HeadGroupSpec.Template.Spec.Containers[0].Ports {
		name := p.Name
		if name == "" {
			name = fmt.Sprint(p.ContainerPort) + "-port"
		}
		ports[name] = p.ContainerPort
	}
	if len(ports) == 0 {
		ports = map[string]int32{
			clientPortName:    defaultClientPort,
			gcsServerPortName: defaultGCSPort,
			DashboardPortName: defaultDashboardPort,
			MetricsPortName:   defaultMetricsPort,
			ServingPortName:   defaultServingPort,
		}
	}
	if _, ok := ports[MetricsPortName]; !ok {
		ports[MetricsPortName] = defaultMetricsPort
	}
	return ports
}

// Ingress is the dashboard's Ingress the operator makes for a RayCluster
// with enableIngress (common/ingress.go BuildIngressForHeadService): the
// cluster's annotations (its class from kubernetes.io/ingress.class), a
// path to the head Service's dashboard port.
func Ingress(cluster rayv1.RayCluster) *networkingv1.Ingress {
	annotations := map[string]string{}
	for k, v := range cluster.Annotations {
		if k != IngressClassAnnotation {
			annotations[k] = v
		}
	}
	dashboard := int32(defaultDashboardPort)
	if p, ok := servicePorts(cluster)[DashboardPortName]; ok {
		dashboard = p
	}
	exact := networkingv1.PathTypeExact
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{
			Name:      cluster.Name + "-head-ingress",
			Namespace: cluster.Namespace,
			Labels: map[string]string{
				ClusterLabel:    cluster.Name,
				IdentifierLabel: identifier(cluster.Name, rayv1.HeadNode),
				AppNameLabel:    appName,
				CreatedByLabel:  componentName,
			},
			Annotations: annotations,
		},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path:     "/" + cluster.Name + "/(.*)",
				PathType: &exact,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: headServiceName(RayCluster, cluster.Spec, cluster.Name),
					Port: networkingv1.ServiceBackendPort{Number: dashboard},
				}},
			}}},
		}}}},
	}
	if class, ok := cluster.Annotations[IngressClassAnnotation]; ok {
		ing.Spec.IngressClassName = &class
	}
	return ing
}
