package kubestore

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"gridweave.dev/joinkeys"
)

// Group and Version are the API group and version of the ledger's
// objects.
const (
	Group   = "ledger.gridweave.dev"
	Version = "v1"
)

// The ledger's resources (plural names).
const (
	resourceKeys   = "joinkeys"
	resourceNodes  = "ledgernodes"
	resourceClaims = "ledgerclaims"
	resourceEvents = "ledgerevents"
	resourceTables = "podcidrtables"
)

// Labels the store sets, so that lists can select on the API server.
const (
	labelClaim     = Group + "/claim"      // "address" or "public-key" on a LedgerClaim written before the one writer
	labelPublicKey = Group + "/public-key" // a LedgerNode's public key (publicKeyLabel)
)

//go:embed crds/*.yaml
var crdFiles embed.FS

// CRDs returns the ledger's CustomResourceDefinitions: JoinKey,
// LedgerNode, LedgerClaim, LedgerEvent and PodCIDRTable, in group
// ledger.gridweave.dev.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(crdFiles, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		raw, err := crdFiles.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("kubestore: %s: %w", f, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// InstallCRDs creates the ledger's CRDs, or updates them to this version,
// and waits until the API server serves them. It needs permission to write
// customresourcedefinitions; a cluster administrator can instead apply
// deploy/kubernetes/ha/ledger-crds.yaml.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	client, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds, err := CRDs()
	if err != nil {
		return err
	}
	crdAPI := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, want := range crds {
		_, err := crdAPI.Create(ctx, want, metav1.CreateOptions{FieldManager: "gridweave"})
		if apierrors.IsAlreadyExists(err) {
			err = updateCRD(ctx, client, want)
		}
		if err != nil {
			return fmt.Errorf("kubestore: install CRD %s: %w", want.Name, err)
		}
	}
	for _, want := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := crdAPI.Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("kubestore: CRD %s not established: %w", want.Name, err)
		}
	}
	return nil
}

func updateCRD(ctx context.Context, client apiextensions.Interface, want *apiextensionsv1.CustomResourceDefinition) error {
	crdAPI := client.ApiextensionsV1().CustomResourceDefinitions()
	for {
		got, err := crdAPI.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got.Spec = want.Spec
		got.Labels = want.Labels
		_, err = crdAPI.Update(ctx, got, metav1.UpdateOptions{FieldManager: "gridweave"})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// restClient returns a client for the ledger's group. It does not limit
// its own rate (client-go's default is 5 requests a second): a join makes
// several calls, and the API server's priority and fairness decides.
func restClient(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	c.GroupVersion = &schema.GroupVersion{Group: Group, Version: Version}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.QPS, c.Burst, c.RateLimiter = -1, 0, nil
	if c.UserAgent == "" {
		c.UserAgent = "gridweave-kubestore"
	}
	return rest.RESTClientFor(c)
}

// objectMeta is the part of an object's metadata the store reads and
// writes; the rest (managedFields above all) is not decoded.
type objectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	CreationTimestamp *time.Time        `json:"creationTimestamp,omitempty"`
}

// revision is the object's resourceVersion as a number. The API server's
// resourceVersions are etcd revisions: they increase cluster-wide with
// every write and are never reused, which is what the ledger's revisions
// and audit IDs promise.
func (m objectMeta) revision() (int64, error) {
	rv, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("kubestore: %s has resourceVersion %q, not a number", m.Name, m.ResourceVersion)
	}
	return rv, nil
}

// object is one of the ledger's objects with its spec.
type object[S any] struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       S          `json:"spec"`
}

type objectList[S any] struct {
	Metadata struct {
		Continue string `json:"continue,omitempty"`
	} `json:"metadata"`
	Items []object[S] `json:"items"`
}

// resource is one of the ledger's resources in the store's namespace.
type resource[S any] struct {
	client    rest.Interface
	namespace string
	plural    string
	kind      string
	// writer, when set, is written as WriterAnnotation on every object
	// created or updated.
	writer string
}

// signed is obj carrying r's writer.
func (r resource[S]) signed(obj object[S]) object[S] {
	if r.writer == "" {
		return obj
	}
	annotations := make(map[string]string, len(obj.Metadata.Annotations)+1)
	for k, v := range obj.Metadata.Annotations {
		annotations[k] = v
	}
	annotations[WriterAnnotation] = r.writer
	obj.Metadata.Annotations = annotations
	return obj
}

func (r resource[S]) new(name string, labels map[string]string, spec S) object[S] {
	return object[S]{APIVersion: Group + "/" + Version, Kind: r.kind, Metadata: objectMeta{Name: name, Namespace: r.namespace, Labels: labels}, Spec: spec}
}

func (r resource[S]) decode(raw []byte, err error) (object[S], error) {
	if err != nil {
		return object[S]{}, err
	}
	var out object[S]
	if err := json.Unmarshal(raw, &out); err != nil {
		return object[S]{}, fmt.Errorf("kubestore: decode %s: %w", r.kind, err)
	}
	return numbered(out), nil
}

// numbered is o with the IDs of a node's audit events written in them:
// an event stored without one gets the ID its node's resourceVersion
// gives it, which it keeps when the node is written again. Other objects
// are returned as they are.
func numbered[S any](o object[S]) object[S] {
	sp, ok := any(&o.Spec).(*nodeSpec)
	if !ok || len(sp.Events) == 0 {
		return o
	}
	rv, err := o.Metadata.revision()
	if err != nil {
		return o // nodeRecord refuses the node
	}
	sp.Events = slices.Clone(sp.Events)
	for i := range sp.Events {
		if sp.Events[i].ID == 0 {
			sp.Events[i].ID = rv<<idShift | int64(i)
		}
	}
	return o
}

func (r resource[S]) create(ctx context.Context, obj object[S]) (object[S], error) {
	body, err := json.Marshal(r.signed(obj))
	if err != nil {
		return object[S]{}, err
	}
	raw, err := r.client.Post().Namespace(r.namespace).Resource(r.plural).Body(body).Do(ctx).Raw()
	return r.decode(raw, fenceError(raw, err))
}

// createDryRun is create, checked (admission included) and not stored.
func (r resource[S]) createDryRun(ctx context.Context, obj object[S]) (object[S], error) {
	body, err := json.Marshal(r.signed(obj))
	if err != nil {
		return object[S]{}, err
	}
	raw, err := r.client.Post().Namespace(r.namespace).Resource(r.plural).Param("dryRun", "All").Body(body).Do(ctx).Raw()
	return r.decode(raw, fenceError(raw, err))
}

func (r resource[S]) get(ctx context.Context, name string) (object[S], error) {
	return r.decode(r.client.Get().Namespace(r.namespace).Resource(r.plural).Name(name).Do(ctx).Raw())
}

// update writes obj if its resourceVersion is still the stored one (a
// Conflict otherwise).
func (r resource[S]) update(ctx context.Context, obj object[S]) (object[S], error) {
	body, err := json.Marshal(r.signed(obj))
	if err != nil {
		return object[S]{}, err
	}
	raw, err := r.client.Put().Namespace(r.namespace).Resource(r.plural).Name(obj.Metadata.Name).Body(body).Do(ctx).Raw()
	return r.decode(raw, fenceError(raw, err))
}

// remove deletes the object with name if its UID and resourceVersion are
// still the given ones (either may be empty).
func (r resource[S]) remove(ctx context.Context, name, uid, resourceVersion string) error {
	opts := struct {
		APIVersion    string `json:"apiVersion"`
		Kind          string `json:"kind"`
		Preconditions struct {
			UID             string `json:"uid,omitempty"`
			ResourceVersion string `json:"resourceVersion,omitempty"`
		} `json:"preconditions"`
	}{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}
	opts.Preconditions.UID = uid
	opts.Preconditions.ResourceVersion = resourceVersion
	body, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	raw, err := r.client.Delete().Namespace(r.namespace).Resource(r.plural).Name(name).Body(bytes.NewReader(body)).Do(ctx).Raw()
	return fenceError(raw, err)
}

// removeSigned is remove (under obj's UID and resourceVersion) held to
// the fence: a Store with a writer first marks obj as its deletion
// (DeletingAnnotation beside WriterAnnotation, an update the fence
// checks), then deletes the object as marked, which the fence lets
// through only while the mark's writer holds the Lease. marked is the
// object as the mark left it, zero when nothing was written.
func (r resource[S]) removeSigned(ctx context.Context, obj object[S]) (marked object[S], err error) {
	if r.writer == "" {
		return object[S]{}, r.remove(ctx, obj.Metadata.Name, obj.Metadata.UID, obj.Metadata.ResourceVersion)
	}
	annotations := maps.Clone(obj.Metadata.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DeletingAnnotation] = r.writer
	obj.Metadata.Annotations = annotations
	if marked, err = r.update(ctx, obj); err != nil {
		return object[S]{}, err
	}
	return marked, r.remove(ctx, marked.Metadata.Name, marked.Metadata.UID, marked.Metadata.ResourceVersion)
}

// listPageSize bounds one list call; larger lists are read page by page.
const listPageSize = 500

// each calls visit for the objects selector selects, in name order, page
// by page, until visit returns false.
func (r resource[S]) each(ctx context.Context, selector string, visit func(object[S]) bool) error {
	return r.eachPaged(ctx, selector, listPageSize, visit)
}

// cached lists the objects selector selects from the API server's watch
// cache (resourceVersion 0: as recent as the cache, not a read of etcd),
// in one answer: for a small selection whose staleness the caller
// tolerates.
func (r resource[S]) cached(ctx context.Context, selector string) ([]object[S], error) {
	raw, err := r.client.Get().Namespace(r.namespace).Resource(r.plural).Param("resourceVersion", "0").Param("labelSelector", selector).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var list objectList[S]
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("kubestore: decode %s list: %w", r.kind, err)
	}
	for i, item := range list.Items {
		list.Items[i] = numbered(item)
	}
	return list.Items, nil
}

// eachPaged is each with pages of size objects.
func (r resource[S]) eachPaged(ctx context.Context, selector string, size int, visit func(object[S]) bool) error {
	cont := ""
	for {
		req := r.client.Get().Namespace(r.namespace).Resource(r.plural).Param("limit", strconv.Itoa(size))
		if selector != "" {
			req = req.Param("labelSelector", selector)
		}
		if cont != "" {
			req = req.Param("continue", cont)
		}
		raw, err := req.Do(ctx).Raw()
		if err != nil {
			return err
		}
		var page objectList[S]
		if err := json.Unmarshal(raw, &page); err != nil {
			return fmt.Errorf("kubestore: decode %s list: %w", r.kind, err)
		}
		for _, item := range page.Items {
			if !visit(numbered(item)) {
				return nil
			}
		}
		if cont = page.Metadata.Continue; cont == "" {
			return nil
		}
	}
}

// selector joins label requirements key=value, in a stable order.
func selector(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for k, v := range labels {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// keySpec is a JoinKey's spec: a joinkeys.KeyRecord less its ID (the
// object's name).
type keySpec struct {
	Kind       joinkeys.Kind     `json:"kind"`
	Org        string            `json:"org,omitempty"`
	Provider   string            `json:"provider,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	CreatedBy  string            `json:"createdBy,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	ExpiresAt  time.Time         `json:"expiresAt"`
	MaxUses    int               `json:"maxUses,omitempty"`
	Uses       int               `json:"uses,omitempty"`
	RevokedAt  time.Time         `json:"revokedAt,omitzero"`
	LastUsed   time.Time         `json:"lastUsed,omitzero"`
	SecretHash []byte            `json:"secretHash,omitempty"`
	// InsertedAt orders keys inserted in the same second.
	InsertedAt time.Time `json:"insertedAt,omitzero"`
}

// nodeSpec is a LedgerNode's spec: a joinkeys.NodeRecord less its
// hostname (the object's name) and revision (its resourceVersion).
type nodeSpec struct {
	PublicKey    string          `json:"publicKey"`
	VPNIP        string          `json:"vpnIP"`
	Org          string          `json:"org,omitempty"`
	JoinKeyID    string          `json:"joinKeyID,omitempty"`
	Version      string          `json:"version,omitempty"`
	GPUs         []joinkeys.GPU  `json:"gpus,omitempty"`
	PodCIDR      string          `json:"podCIDR,omitempty"`
	Status       joinkeys.Status `json:"status"`
	CreatedAt    time.Time       `json:"createdAt,omitzero"`
	UpdatedAt    time.Time       `json:"updatedAt,omitzero"`
	RegisteredAt time.Time       `json:"registeredAt,omitzero"`
	LastSeen     time.Time       `json:"lastSeen,omitzero"`
	TokenHash    []byte          `json:"tokenHash,omitempty"`
	PoolID       string          `json:"poolID,omitempty"`
	// Reservation is a random ID the node's claims carry too, so that a
	// claim is released only by the node that took it.
	Reservation string `json:"reservation"`
	// Events are the node's newest audit events (at most
	// maxCarriedEvents), written with the node's own writes: an event
	// without an ID is the one the write that stored it added, its ID
	// that write's resourceVersion times 1024 plus its place (numbered).
	Events []eventEntry `json:"events,omitempty"`
}

// claimSpec is a LedgerClaim's spec: who holds it.
type claimSpec struct {
	Hostname    string `json:"hostname"`
	Reservation string `json:"reservation"`
	// ReleasedAt is set on an address's claim when its node was released:
	// the claim keeps the address resting (quarantined) until a
	// reservation whose ReleasedBefore is past it takes the claim over.
	ReleasedAt *time.Time `json:"releasedAt,omitempty"`
}

// eventSpec is a LedgerEvent's spec: audit events, each without its ID
// (which the object's resourceVersion gives, storedEvents) unless it
// was first written elsewhere.
type eventSpec struct {
	// Events is a batch of events, in the order they were written.
	Events []eventEntry `json:"events,omitempty"`
	// An event written alone, as events were before batches (read only).
	At       *time.Time         `json:"at,omitempty"`
	Type     joinkeys.EventType `json:"type,omitempty"`
	KeyID    string             `json:"keyID,omitempty"`
	Hostname string             `json:"hostname,omitempty"`
	Actor    string             `json:"actor,omitempty"`
	Reason   string             `json:"reason,omitempty"`
}

// eventEntry is one audit event of a LedgerEvent or a LedgerNode.
type eventEntry struct {
	At       time.Time          `json:"at"`
	Type     joinkeys.EventType `json:"type"`
	KeyID    string             `json:"keyID,omitempty"`
	Hostname string             `json:"hostname,omitempty"`
	Actor    string             `json:"actor,omitempty"`
	Reason   string             `json:"reason,omitempty"`
	// ID is the event's ID once it is written where the resourceVersion
	// it was counted from no longer tells it: in a batch a prune rewrote,
	// moved from its node to the trail, or kept by a later write of its
	// node; zero until then.
	ID int64 `json:"id,omitempty"`
}

// tableSpec is the PodCIDRTable's spec: hostname → the pod CIDR its node
// holds.
type tableSpec struct {
	Entries map[string]tableEntry `json:"entries,omitempty"`
}

type tableEntry struct {
	CIDR string `json:"cidr"`
	// Next is a CIDR the node is being given, taken beside CIDR until the
	// node's write ends.
	Next        string `json:"next,omitempty"`
	Reservation string `json:"reservation"`
	// Since is when the entry was written, to age a leftover by.
	Since time.Time `json:"since,omitzero"`
}
