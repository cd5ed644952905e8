package kubestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gridweave.dev/joinkeys"
)

// WriterAnnotation names, on every object a Store with Options.Writer
// creates or updates, the replica that wrote it.
const WriterAnnotation = Group + "/writer"

// DeletingAnnotation marks an object its writer is deleting: a Store with
// Options.Writer deletes an object by first writing this mark (an update,
// fenced as every update is), then deleting the object as marked (under
// the marked resourceVersion), which the fence lets through only while
// the object's writer, the replica that marked it, holds the Lease. A
// mark that outlives its delete (refused, cut off) is cleared by the next
// writer as it loads the ledger (a LedgerEvent's by the next prune).
const DeletingAnnotation = Group + "/deleting"

// FencePolicy is the ValidatingAdmissionPolicy that keeps a ledger to one
// writer: the API server refuses a create or update of a ledger object
// whose WriterAnnotation is not the holder of the Lease its binding names,
// and a delete of an object marked with DeletingAnnotation whose
// WriterAnnotation (the replica that marked it) is not. A deposed leader, one that has not noticed yet
// that another replica took the Lease, so cannot write: the takeover
// itself (the Lease's new holder) is the fence, and every write is checked
// against it where it lands. A delete without the mark (an administrator's,
// the namespace's removal) is not fenced. While the Lease is held by no
// one (released, or never taken) and when it does not exist, writes are
// not fenced: a migration before the replicas start, or after they
// stopped.
const FencePolicy = "gridweave-ledger-fence"

// Fence says which ledger one binding of FencePolicy fences, and by which
// Lease.
type Fence struct {
	LedgerNamespace string // where the ledger's objects are
	LeaseNamespace  string // where the Lease is (the replicas' own namespace)
	LeaseName       string // the Lease the replicas compete for
}

// signedBy is a CEL expression: whether the object o names the Lease's
// holder as its writer.
func signedBy(o string) string {
	return `(has(` + o + `.metadata.annotations) && "` + WriterAnnotation + `" in ` + o + `.metadata.annotations && ` +
		o + `.metadata.annotations["` + WriterAnnotation + `"] == params.spec.holderIdentity)`
}

// fenceExpression allows a create or update whose writer holds the Lease,
// a delete of an object not marked as a writer's deletion or marked by the
// holder, and every write while no one holds the Lease.
var fenceExpression = `!has(params.spec.holderIdentity) || params.spec.holderIdentity == "" || ` +
	`(request.operation == "DELETE" ? ` +
	`(!has(oldObject.metadata.annotations) || !("` + DeletingAnnotation + `" in oldObject.metadata.annotations) || ` + signedBy("oldObject") + `) : ` +
	signedBy("object") + `)`

// FenceKeeperBinding is the binding of FencePolicy that fences nothing
// (it matches no namespace) and that InstallFence makes beside the
// bindings of ledgers: the API server watches the Leases (the policy's
// params) only while a binding uses a policy that takes them, and once
// it stopped (the last such binding deleted) it does not watch them again until it
// restarts, so a binding made after that finds no Lease and lets every
// write through. With this binding, which nothing deletes, a ledger's
// binding can go (its ledger retired) and another come.
const FenceKeeperBinding = FencePolicy + ".keeper"

// FenceKeeper returns FenceKeeperBinding.
func FenceKeeper() *admissionv1.ValidatingAdmissionPolicyBinding {
	allow := admissionv1.AllowAction
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: FenceKeeperBinding, Labels: map[string]string{"app.kubernetes.io/part-of": "gridweave"}},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: FencePolicy,
			ParamRef:   &admissionv1.ParamRef{Name: "gridweave-fence-keeper", Namespace: "kube-system", ParameterNotFoundAction: &allow},
			// Every namespace has this label: the binding matches none.
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpDoesNotExist,
			}}}},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

// FenceObjects returns FencePolicy and the binding that fences f's ledger.
func FenceObjects(f Fence) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	fail := admissionv1.Fail
	forbidden := metav1.StatusReasonForbidden
	allow := admissionv1.AllowAction
	labels := map[string]string{"app.kubernetes.io/part-of": "gridweave"}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: FencePolicy, Labels: labels},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			ParamKind:     &admissionv1.ParamKind{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{Group}, APIVersions: []string{"*"}, Resources: []string{"*"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression:        fenceExpression,
				MessageExpression: `"` + FencePolicy + `: only the holder of the Lease " + params.metadata.name + " (" + params.spec.holderIdentity + ") writes the ledger"`,
				Reason:            &forbidden,
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: FencePolicy + "." + f.LedgerNamespace, Labels: labels},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        FencePolicy,
			ParamRef:          &admissionv1.ParamRef{Name: f.LeaseName, Namespace: f.LeaseNamespace, ParameterNotFoundAction: &allow},
			MatchResources:    &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.LedgerNamespace}}},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	return policy, binding
}

// InstallFence creates FencePolicy, FenceKeeperBinding and the binding
// that fences f's ledger, or brings them to what FenceObjects and
// FenceKeeper say. It needs a cluster
// administrator's rights (all three are cluster-scoped).
func InstallFence(ctx context.Context, cfg *rest.Config, f Fence) error {
	if f.LedgerNamespace == "" || f.LeaseNamespace == "" || f.LeaseName == "" {
		return errors.New("kubestore: a fence needs the ledger's namespace and the Lease's namespace and name")
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	policy, binding := FenceObjects(f)
	if err := createOrUpdate(ctx, kube.AdmissionregistrationV1().ValidatingAdmissionPolicies(), policy.Name, policy,
		func(got *admissionv1.ValidatingAdmissionPolicy) { got.Spec = policy.Spec }); err != nil {
		return fmt.Errorf("kubestore: the fence's policy: %w", err)
	}
	if err := createOrUpdate(ctx, kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings(), binding.Name, binding,
		func(got *admissionv1.ValidatingAdmissionPolicyBinding) { got.Spec = binding.Spec }); err != nil {
		return fmt.Errorf("kubestore: the fence's binding: %w", err)
	}
	keeper := FenceKeeper()
	if err := createOrUpdate(ctx, kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings(), keeper.Name, keeper,
		func(got *admissionv1.ValidatingAdmissionPolicyBinding) { got.Spec = keeper.Spec }); err != nil {
		return fmt.Errorf("kubestore: the fence's keeping binding: %w", err)
	}
	return nil
}

// typedClient is the part of a typed client of cluster-scoped objects
// createOrUpdate uses.
type typedClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrUpdate creates want, or updates the object named name with
// what become copies onto it. Replicas that start together install the
// same objects: a create that finds the object made meanwhile, or an
// update that lost to another, reads it again and tries once more.
func createOrUpdate[T any](ctx context.Context, c typedClient[T], name string, want T, become func(got T)) error {
	var err error
	for range 5 {
		var got T
		got, err = c.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = c.Create(ctx, want, metav1.CreateOptions{FieldManager: "gridweave"})
		case err == nil:
			become(got)
			_, err = c.Update(ctx, got, metav1.UpdateOptions{FieldManager: "gridweave"})
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// fenceError is the error of a write whose answer was body: recognisable
// as joinkeys.ErrFenced when it is the fence's refusal (a 403 whose
// message names the policy; the store's client does not decode the
// message of a refusal, so it is read from the body).
func fenceError(body []byte, err error) error {
	if err != nil && apierrors.IsForbidden(err) && bytes.Contains(body, []byte(FencePolicy+": ")) {
		return fmt.Errorf("%w: %w", joinkeys.ErrFenced, err)
	}
	return err
}

// settleWrites is how long a new writer waits, once the fence names it,
// before it reads the ledger: a write the API server admitted for the old
// writer just before is stored within it.
const settleWrites = 500 * time.Millisecond

// probeName names the object AwaitWrites and FenceHolds try to create,
// dry run: never stored.
const probeName = "fence-probe"

// probe tries a dry-run write of a LedgerEvent as writer, and reports
// whether the fence refused it.
func (s *Store) probe(ctx context.Context, writer string) (refused bool, err error) {
	r := s.events
	r.writer = writer
	_, err = r.createDryRun(ctx, r.new(probeName, nil, eventSpec{Events: []eventEntry{{At: time.Now().UTC(), Type: "fence_probe"}}}))
	if errors.Is(err, joinkeys.ErrFenced) {
		return true, nil
	}
	return false, err
}

// AwaitWrites waits until the API server takes this Store's writes, then
// loads the ledger afresh (Reload): once a replica holds the Lease, the
// fence names it as soon as the API server's view of the Lease caught up
// (the fence reads it from a cache), and from then on refuses the writes
// of any replica that held it before. It tries a dry-run write every 100
// ms until one is taken or ctx ends (through errors too, for a while:
// the API server may be busy), and lets a write the old leader had
// admitted just before land (settleWrites) before it reads the ledger.
func (s *Store) AwaitWrites(ctx context.Context) error {
	failing := time.Time{} // since when the dry runs fail
	for {
		refused, err := s.probe(ctx, s.writer)
		if err != nil {
			// The API server may be busy or restarting: try again, for
			// a while.
			if failing.IsZero() {
				failing = time.Now()
			}
			if ctx.Err() != nil || time.Since(failing) > writeTimeout {
				return fmt.Errorf("kubestore: a dry-run write: %w", err)
			}
			refused = true
		} else {
			failing = time.Time{}
		}
		if !refused {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(settleWrites):
			}
			return s.Reload(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubestore: the fence still refuses %q's writes: %w", s.writer, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FenceHolds reports whether the API server refuses a write of a replica
// that does not hold the Lease (a dry run as a writer no replica is):
// false means no fence is installed for this ledger, or the Lease is held
// by no one.
func (s *Store) FenceHolds(ctx context.Context) (bool, error) {
	return s.probe(ctx, "gridweave-fence-probe-not-a-replica")
}
