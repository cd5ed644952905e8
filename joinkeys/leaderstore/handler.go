package leaderstore

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"gridweave.dev/joinkeys"
)

// HandlerOptions configures Handler.
type HandlerOptions struct {
	// Credential is the replicas' shared credential (Credential); a
	// request without it as its bearer token is refused with 401.
	Credential string
	// Leading reports whether this replica leads now. While it does not,
	// every write is refused (503, not_leader) and nothing is written.
	Leading func() bool
	// WriteTimeout bounds one write (default 30s). A write runs to its
	// end even when the replica that sent it hangs up, as it would have
	// had that replica written it itself.
	WriteTimeout time.Duration
	// Logger receives refusals; nil discards.
	Logger *slog.Logger
}

// ForReplicas serves next to the other replicas only: a request without
// credential (Credential) as its bearer token is refused (401), and
// every request while answering reports false (503: the asker looks for
// the leader). Channels beside the ledger's (link reports, what the
// leader's device observed) are guarded with it.
func ForReplicas(credential string, answering func() bool, next http.Handler) http.Handler {
	want := []byte("Bearer " + credential)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if credential == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "the replicas' credential is required", http.StatusUnauthorized)
			return
		}
		if answering == nil || !answering() {
			http.Error(w, "this replica does not lead", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxRequestBytes bounds a write's body: a node with its GPUs and an
// audit event are a few kilobytes.
const maxRequestBytes = 1 << 20

// Handler serves store's writes, and the reads that must be fresh, to the
// other replicas at PathPrefix.
func Handler(store joinkeys.Store, opts HandlerOptions) http.Handler {
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	want := []byte("Bearer " + opts.Credential)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "writes are POSTs", http.StatusMethodNotAllowed)
			return
		}
		if opts.Credential == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			log.Warn("ledger write refused: not the replicas' credential", "remote", r.RemoteAddr)
			http.Error(w, "the replicas' credential is required", http.StatusUnauthorized)
			return
		}
		op, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
		run := operations[op]
		if !ok || run == nil {
			http.Error(w, "no such ledger operation", http.StatusNotFound)
			return
		}
		if opts.Leading == nil || !opts.Leading() {
			writeAnswer(w, http.StatusServiceUnavailable, answer{Error: &wireError{Kind: kindNotLeader, Message: "this replica does not lead"}})
			return
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		dec.DisallowUnknownFields()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), opts.WriteTimeout)
		defer cancel()
		a, err := run(ctx, store, dec)
		if errors.Is(err, errBadRequest) {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err != nil {
			a.Error = encodeError(err)
		}
		writeAnswer(w, http.StatusOK, a)
	})
}

func writeAnswer(w http.ResponseWriter, status int, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

var errBadRequest = errors.New("leaderstore: malformed write")

// decodeInto reads the operation's body into v.
func decodeInto(dec *json.Decoder, v any) error {
	if err := dec.Decode(v); err != nil {
		return errors.Join(errBadRequest, err)
	}
	return nil
}

// operations runs each write, and each read that must be fresh, on the
// leader's Store.
var operations = map[string]func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error){
	"insert_key": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q insertKeyRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		return answer{}, store.InsertKey(ctx, q.Key)
	},
	"revoke_key": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q revokeKeyRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		k, err := store.RevokeKey(ctx, q.ID, q.At)
		return answer{Key: &k}, err
	},
	"return_key_use": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q returnKeyUseRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		k, err := store.ReturnKeyUse(ctx, q.ID)
		return answer{Key: &k}, err
	},
	"reserve_node": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q reserveNodeRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		r, err := q.reservation()
		if err != nil {
			return answer{}, errors.Join(errBadRequest, err)
		}
		n, err := store.ReserveNode(ctx, r)
		return answer{Node: &n}, err
	},
	"update_node": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q updateNodeRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		n, err := store.UpdateNode(ctx, q.Node, q.Event)
		return answer{Node: &n}, err
	},
	"delete_node": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q deleteNodeRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		n, err := store.DeleteNode(ctx, q.Hostname, q.Revision, q.At)
		return answer{Node: &n}, err
	},
	"append_audit": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q appendAuditRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		return answer{}, store.AppendAudit(ctx, q.Event)
	},
	"key": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q keyRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		k, err := store.Key(ctx, q.ID)
		return answer{Key: &k}, err
	},
	"node": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q nodeRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		n, err := store.Node(ctx, q.Hostname)
		return answer{Node: &n}, err
	},
	"node_by_public_key": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q nodeByPublicKeyRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		n, err := store.NodeByPublicKey(ctx, q.PublicKey)
		return answer{Node: &n}, err
	},
	"prune_audit": func(ctx context.Context, store joinkeys.Store, dec *json.Decoder) (answer, error) {
		var q pruneAuditRequest
		if err := decodeInto(dec, &q); err != nil {
			return answer{}, err
		}
		removed, err := store.PruneAudit(ctx, q.Retention, q.Now)
		return answer{Removed: removed}, err
	},
}
