package realnode

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"gridweave.dev/deploy"
	"gridweave.dev/manifest/validation"
)

// KubeletRBACFile is the deploy file of the kubelet join mode's bindings:
// what kubeadm binds for bootstrap tokens, and the server's own rules.
const KubeletRBACFile = "kubernetes/kubelet/rbac-kubelet.yaml"

// KubeletPolicyFile is the deploy file of the kubelet join mode's
// admission policy: a node's kubelet may not choose its pod CIDR.
const KubeletPolicyFile = "kubernetes/kubelet/node-pod-cidr-policy.yaml"

// ApplyKubeletRBAC creates the objects of KubeletRBACFile and
// KubeletPolicyFile, as shipped, with kube (an administrator's client);
// those already there are kept. Their names are cluster-wide: once per
// control plane is enough.
func ApplyKubeletRBAC(ctx context.Context, kube kubernetes.Interface) error {
	for _, file := range []string{KubeletRBACFile, KubeletPolicyFile} {
		if err := applyFile(ctx, kube, file); err != nil {
			return err
		}
	}
	return nil
}

func applyFile(ctx context.Context, kube kubernetes.Interface, file string) error {
	raw, err := fs.ReadFile(deploy.Files, file)
	if err != nil {
		return err
	}
	docs, err := validation.ReadDocuments(file, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	rbac, admission := kube.RbacV1(), kube.AdmissionregistrationV1()
	for _, d := range docs {
		var err error
		switch d.Object.GetKind() {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &o); err == nil {
				_, err = rbac.ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
			}
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &o); err == nil {
				_, err = rbac.ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
			}
		case "Role":
			var o rbacv1.Role
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &o); err == nil {
				_, err = rbac.Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			}
		case "RoleBinding":
			var o rbacv1.RoleBinding
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &o); err == nil {
				_, err = rbac.RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			}
		case "ValidatingAdmissionPolicy":
			var o admissionv1.ValidatingAdmissionPolicy
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &o); err == nil {
				_, err = admission.ValidatingAdmissionPolicies().Create(ctx, &o, metav1.CreateOptions{})
			}
		case "ValidatingAdmissionPolicyBinding":
			var o admissionv1.ValidatingAdmissionPolicyBinding
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &o); err == nil {
				_, err = admission.ValidatingAdmissionPolicyBindings().Create(ctx, &o, metav1.CreateOptions{})
			}
		default:
			err = fmt.Errorf("%s holds a %s", file, d.Object.GetKind())
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: %s %s: %w", file, d.Object.GetKind(), d.Object.GetName(), err)
		}
	}
	return nil
}
