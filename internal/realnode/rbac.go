package realnode

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"

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

// ApplyKubeletRBAC creates the objects of KubeletRBACFile, as shipped,
// with kube (an administrator's client); those already there are kept.
// Its names are cluster-wide: once per control plane is enough.
func ApplyKubeletRBAC(ctx context.Context, kube kubernetes.Interface) error {
	raw, err := fs.ReadFile(deploy.Files, KubeletRBACFile)
	if err != nil {
		return err
	}
	docs, err := validation.ReadDocuments(KubeletRBACFile, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	rbac := kube.RbacV1()
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
		default:
			err = fmt.Errorf("%s holds a %s", KubeletRBACFile, d.Object.GetKind())
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: %s %s: %w", KubeletRBACFile, d.Object.GetKind(), d.Object.GetName(), err)
		}
	}
	return nil
}
