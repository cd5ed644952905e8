package joinkeys

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gridweave.dev/internal/randhex"
)

// Options configure a Keyring. The zero value of each optional field means
// its default.
type Options struct {
	// JWTSecret signs provider keys with HS256 and verifies them. Required,
	// at least MinJWTSecretLen bytes.
	JWTSecret []byte
	// Issuer and Audience go into provider keys and are required on
	// verification. Defaults "gridweave" and "gridweave-join".
	Issuer   string
	Audience string
	// Pool is where node VPN addresses come from. Required for node
	// operations (Join); key operations work without it.
	Pool Pool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives one line per key and node event, naming only ids and
	// hostnames; default discards.
	Logger *slog.Logger
	// MaxTTL bounds the lifetime of a minted key; default one year.
	MaxTTL time.Duration
	// MasterPrefixes are addresses the master routes itself besides the
	// VPN pool (its underlay address, cluster and service CIDRs): a node's
	// pod CIDR may not overlap them.
	MasterPrefixes []netip.Prefix
	// AuditRetention bounds the audit trail (CompactAudit); each zero
	// field takes DefaultAuditRetention's.
	AuditRetention AuditRetention
	// AddressQuarantine is how long a released VPN address is not handed
	// out again: a machine whose link service was down meanwhile may still
	// hold a peer for the departed node at that address, which must not be
	// anyone else's yet. Default DefaultAddressQuarantine; negative: none.
	AddressQuarantine time.Duration
	// RejectionsPerMinute is how many distinct rejected attempts are
	// written in a minute before the rest are counted in one event;
	// default DefaultRejectionsPerMinute.
	RejectionsPerMinute int
}

// SetMasterPrefixes replaces the master's prefixes (Options.MasterPrefixes)
// while the Keyring is in use: a caller following the cluster (its other
// Nodes' pod CIDRs and addresses) keeps them current. Pod CIDRs recorded
// before are not re-checked.
func (k *Keyring) SetMasterPrefixes(prefixes []netip.Prefix) error {
	for i, p := range prefixes {
		if !p.IsValid() {
			return fieldError("master_prefixes", "entry %d is not a valid prefix", i)
		}
	}
	kept := slices.Clone(prefixes)
	k.masterPrefixes.Store(&kept)
	return nil
}

// MasterPrefixes returns the master's prefixes as last set.
func (k *Keyring) MasterPrefixes() []netip.Prefix {
	if p := k.masterPrefixes.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// MinJWTSecretLen is the shortest JWT secret a Keyring accepts: HS256 keys
// shorter than the hash output weaken it (RFC 7518 §3.2).
const MinJWTSecretLen = 32

// Keyring mints and checks join keys and keeps the node ledger over a Store.
// It is safe for concurrent use.
type Keyring struct {
	store    Store
	secret   []byte
	issuer   string
	audience string
	pool     Pool
	now      func() time.Time
	log      *slog.Logger
	maxTTL   time.Duration
	// parser checks a provider key's signature with the pinned algorithm;
	// claims validates its claims, with MaxClockSkew of leeway on iat and
	// nbf (expiry is checked exactly before it).
	parser *jwt.Parser
	claims *jwt.Validator

	masterPrefixes atomic.Pointer[[]netip.Prefix]
	// misses are hostnames AuthenticateNode found in no node lately.
	misses missCache
	// rejected aggregates rejected attempts before they are audited.
	rejected            rejections
	rejectionsPerMinute int
	retention           AuditRetention
	quarantine          time.Duration
}

// DefaultAddressQuarantine is how long a released VPN address rests
// before a new node gets it, unless Options.AddressQuarantine says
// otherwise.
const DefaultAddressQuarantine = time.Hour

// missTTL is how long AuthenticateNode trusts that a hostname names no
// node; maxMisses bounds how many it remembers.
const (
	missTTL   = 2 * time.Second
	maxMisses = 8192
)

// missCache remembers hostnames the store did not hold, for missTTL. A
// join this Keyring makes forgets its hostname at once; one another
// server replica makes is seen within missTTL.
type missCache struct {
	mu sync.Mutex
	at map[string]time.Time
	// joins counts the joins this Keyring made: a miss read before one is
	// not remembered after it (the joined hostname may be that miss's).
	joins uint64
}

// epoch is the joins count, read before a store read whose miss may be
// remembered.
func (c *missCache) epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.joins
}

func (c *missCache) recent(hostname string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.at[hostname]
	return ok && now.Sub(at) < missTTL && !now.Before(at)
}

func (c *missCache) add(hostname string, now time.Time, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.joins {
		return // a join since the read: the miss may be stale
	}
	if c.at == nil || len(c.at) >= maxMisses {
		c.at = map[string]time.Time{} // bounded: start over rather than grow
	}
	c.at[hostname] = now
}

func (c *missCache) forget(hostname string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joins++
	delete(c.at, hostname)
}

// New returns a Keyring over store.
func New(store Store, opts *Options) (*Keyring, error) {
	if store == nil {
		return nil, errors.New("joinkeys: nil Store")
	}
	if opts == nil {
		opts = &Options{}
	}
	if len(opts.JWTSecret) < MinJWTSecretLen {
		return nil, fieldError("jwt_secret", "must be at least %d bytes, got %d", MinJWTSecretLen, len(opts.JWTSecret))
	}
	k := &Keyring{
		store:    store,
		secret:   append([]byte(nil), opts.JWTSecret...),
		issuer:   opts.Issuer,
		audience: opts.Audience,
		pool:     opts.Pool,
		now:      opts.Now,
		log:      opts.Logger,
		maxTTL:   opts.MaxTTL,
	}
	if err := k.SetMasterPrefixes(opts.MasterPrefixes); err != nil {
		return nil, err
	}
	if k.issuer == "" {
		k.issuer = "gridweave"
	}
	if k.audience == "" {
		k.audience = "gridweave-join"
	}
	if k.now == nil {
		k.now = time.Now
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	if k.maxTTL == 0 {
		k.maxTTL = 365 * 24 * time.Hour
	}
	k.retention = opts.AuditRetention
	if k.retention.MaxEvents <= 0 {
		k.retention.MaxEvents = DefaultAuditRetention.MaxEvents
	}
	if k.retention.MaxRejected <= 0 {
		k.retention.MaxRejected = DefaultAuditRetention.MaxRejected
	}
	if k.retention.MaxPerHostname <= 0 {
		k.retention.MaxPerHostname = DefaultAuditRetention.MaxPerHostname
	}
	if k.retention.MaxAge <= 0 {
		k.retention.MaxAge = DefaultAuditRetention.MaxAge
	}
	switch k.quarantine = opts.AddressQuarantine; {
	case k.quarantine == 0:
		k.quarantine = DefaultAddressQuarantine
	case k.quarantine < 0:
		k.quarantine = 0
	}
	k.rejectionsPerMinute = opts.RejectionsPerMinute
	if k.rejectionsPerMinute <= 0 {
		k.rejectionsPerMinute = DefaultRejectionsPerMinute
	}
	k.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithoutClaimsValidation(),
	)
	k.claims = jwt.NewValidator(
		jwt.WithIssuer(k.issuer),
		jwt.WithAudience(k.audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(MaxClockSkew),
		jwt.WithTimeFunc(func() time.Time { return k.now() }),
	)
	return k, nil
}

// Pool returns the address pool nodes are given addresses from.
func (k *Keyring) Pool() Pool { return k.pool }

// MintRequest describes a key to mint.
type MintRequest struct {
	Kind      Kind
	Org       string
	Provider  string // required for KindProvider: the JWT subject
	TTL       time.Duration
	MaxUses   int // 0 means unlimited
	Labels    map[string]string
	CreatedBy string
}

// MintedKey is a new key with its secret, which is shown only this once.
type MintedKey struct {
	Key
	Secret string
}

const (
	orgKeyPrefix  = "gwk_"
	idHexLen      = 12
	secretHexLen  = 64
	nodeTokenPfx  = "gwn_"
	orgKeyLen     = len(orgKeyPrefix) + idHexLen + 1 + secretHexLen
	nodeTokenLen  = len(nodeTokenPfx) + secretHexLen
	maxLabels     = 32
	maxLabelBytes = 256
)

// Mint creates a key. An org key's secret is stored only as a hash; a
// provider key is a JWT whose jti (the key's ID) is stored so it can be
// listed, counted and revoked.
func (k *Keyring) Mint(ctx context.Context, req MintRequest) (MintedKey, error) {
	if err := k.validateMint(req); err != nil {
		return MintedKey{}, err
	}
	now := k.now().UTC().Truncate(time.Second)
	rec := KeyRecord{Key: Key{
		ID:        randhex.String(idHexLen / 2),
		Kind:      req.Kind,
		Org:       req.Org,
		Provider:  req.Provider,
		Labels:    maps.Clone(req.Labels),
		CreatedBy: req.CreatedBy,
		CreatedAt: now,
		ExpiresAt: now.Add(req.TTL),
		MaxUses:   req.MaxUses,
	}}
	var secret string
	switch req.Kind {
	case KindOrg:
		s := randhex.String(secretHexLen / 2)
		secret = orgKeyPrefix + rec.ID + "_" + s
		sum := sha256.Sum256([]byte(s))
		rec.SecretHash = sum[:]
	case KindProvider:
		claims := providerClaims{
			Org: req.Org,
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer:    k.issuer,
				Subject:   req.Provider,
				Audience:  jwt.ClaimStrings{k.audience},
				IssuedAt:  jwt.NewNumericDate(now),
				NotBefore: jwt.NewNumericDate(now),
				ExpiresAt: jwt.NewNumericDate(rec.ExpiresAt),
				ID:        rec.ID,
			},
		}
		signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(k.secret)
		if err != nil {
			return MintedKey{}, fmt.Errorf("sign provider key: %w", err)
		}
		secret = signed
	}
	if err := k.store.InsertKey(ctx, rec); err != nil {
		return MintedKey{}, fmt.Errorf("store key %s: %w", rec.ID, err)
	}
	k.audit(ctx, AuditEvent{Type: EventKeyMinted, KeyID: rec.ID, Actor: req.CreatedBy})
	k.log.InfoContext(ctx, "join key minted", "key_id", rec.ID, "kind", rec.Kind, "org", rec.Org, "expires_at", rec.ExpiresAt)
	return MintedKey{Key: rec.Key, Secret: secret}, nil
}

func (k *Keyring) validateMint(req MintRequest) error {
	switch req.Kind {
	case KindOrg, KindProvider:
	default:
		return fieldError("kind", "must be %q or %q, got %q", KindOrg, KindProvider, req.Kind)
	}
	if err := checkName("org", req.Org); err != nil {
		return err
	}
	if req.Kind == KindProvider {
		if err := checkName("provider", req.Provider); err != nil {
			return err
		}
	} else if req.Provider != "" {
		return fieldError("provider", "only provider keys name a provider")
	}
	if req.TTL <= 0 {
		return fieldError("ttl_seconds", "must be positive")
	}
	if req.TTL > k.maxTTL {
		return fieldError("ttl_seconds", "must be at most %d (%s)", int64(k.maxTTL/time.Second), k.maxTTL)
	}
	if req.MaxUses < 0 {
		return fieldError("max_uses", "must not be negative")
	}
	if len(req.Labels) > maxLabels {
		return fieldError("labels", "at most %d labels", maxLabels)
	}
	for name, value := range req.Labels {
		if name == "" || len(name) > maxLabelBytes || len(value) > maxLabelBytes {
			return fieldError("labels", "label names must be 1-%d bytes and values at most %d bytes", maxLabelBytes, maxLabelBytes)
		}
	}
	return nil
}

// checkName accepts 1-128 printable bytes without spaces or control characters.
func checkName(field, v string) error {
	if v == "" {
		return fieldError(field, "is required")
	}
	if len(v) > 128 {
		return fieldError(field, "must be at most 128 bytes")
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return fieldError(field, "must not contain spaces or control characters")
		}
	}
	return nil
}

type providerClaims struct {
	Org string `json:"org"`
	jwt.RegisteredClaims
}

// Check authenticates a join key (an org key or a provider JWT) without
// spending a use, and returns it. A malformed, unknown or wrongly signed
// key is ErrKeyInvalid; otherwise the error says why it cannot be used
// (ErrKeyExpired, ErrKeyRevoked, ErrKeyExhausted, ErrKeyNotYetValid).
func (k *Keyring) Check(ctx context.Context, presented string) (Key, error) {
	rec, err := k.lookup(ctx, presented)
	if err != nil {
		return Key{}, err
	}
	if err := rec.UsableAt(k.now()); err != nil {
		return rec.Key, fmt.Errorf("key %s: %w", rec.ID, err)
	}
	return rec.Key, nil
}

// lookup finds the stored key a presented secret names and proves the
// secret (hash or signature), without judging expiry or uses.
func (k *Keyring) lookup(ctx context.Context, presented string) (KeyRecord, error) {
	if strings.HasPrefix(presented, orgKeyPrefix) {
		return k.lookupOrgKey(ctx, presented)
	}
	if strings.Count(presented, ".") == 2 {
		rec, _, err := k.lookupProviderKey(ctx, presented)
		return rec, err
	}
	return KeyRecord{}, ErrKeyInvalid
}

func (k *Keyring) lookupOrgKey(ctx context.Context, presented string) (KeyRecord, error) {
	if len(presented) != orgKeyLen || presented[len(orgKeyPrefix)+idHexLen] != '_' {
		return KeyRecord{}, ErrKeyInvalid
	}
	id := presented[len(orgKeyPrefix) : len(orgKeyPrefix)+idHexLen]
	secret := presented[len(orgKeyPrefix)+idHexLen+1:]
	if !isLowerHex(id) || !isLowerHex(secret) {
		return KeyRecord{}, ErrKeyInvalid
	}
	rec, err := k.store.Key(ctx, id)
	if errors.Is(err, ErrKeyNotFound) {
		return KeyRecord{}, ErrKeyInvalid
	}
	if err != nil {
		return KeyRecord{}, err
	}
	sum := sha256.Sum256([]byte(secret))
	if rec.Kind != KindOrg || subtle.ConstantTimeCompare(sum[:], rec.SecretHash) != 1 {
		return KeyRecord{}, ErrKeyInvalid
	}
	return rec, nil
}

func (k *Keyring) lookupProviderKey(ctx context.Context, token string) (KeyRecord, *providerClaims, error) {
	claims := &providerClaims{}
	_, err := k.parser.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return k.secret, nil })
	if err == nil && claims.ExpiresAt != nil && !k.now().Before(claims.ExpiresAt.Time) {
		err = jwt.ErrTokenExpired // exact, like an org key's expiry
	}
	if err == nil {
		err = k.claims.Validate(claims)
	}
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return KeyRecord{}, nil, ErrKeyExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return KeyRecord{}, nil, ErrKeyNotYetValid
	case err != nil:
		return KeyRecord{}, nil, ErrKeyInvalid
	}
	if claims.ID == "" || claims.Subject == "" {
		return KeyRecord{}, nil, ErrKeyInvalid
	}
	rec, err := k.store.Key(ctx, claims.ID)
	if errors.Is(err, ErrKeyNotFound) {
		return KeyRecord{}, nil, ErrKeyInvalid
	}
	if err != nil {
		return KeyRecord{}, nil, err
	}
	if rec.Kind != KindProvider || rec.Provider != claims.Subject || rec.Org != claims.Org {
		return KeyRecord{}, nil, ErrKeyInvalid
	}
	return rec, claims, nil
}

// Provider is the identity a provider key proves.
type Provider struct {
	Name      string // the JWT subject
	Org       string
	KeyID     string
	ExpiresAt time.Time
}

// VerifyProvider authenticates a provider by its provider key (the JWT):
// signature with the pinned algorithm, issuer, audience, expiry and
// not-before, and that the key was not revoked. It does not spend a use.
func (k *Keyring) VerifyProvider(ctx context.Context, token string) (Provider, error) {
	rec, _, err := k.lookupProviderKey(ctx, token)
	if err != nil {
		return Provider{}, err
	}
	if rec.Revoked() {
		return Provider{}, fmt.Errorf("key %s: %w", rec.ID, ErrKeyRevoked)
	}
	return Provider{Name: rec.Provider, Org: rec.Org, KeyID: rec.ID, ExpiresAt: rec.ExpiresAt}, nil
}

// Revoke revokes the key with id; revoking twice keeps the first time.
func (k *Keyring) Revoke(ctx context.Context, id, actor string) (Key, error) {
	rec, err := k.store.RevokeKey(ctx, id, k.now().UTC())
	if err != nil {
		return Key{}, err
	}
	k.audit(ctx, AuditEvent{Type: EventKeyRevoked, KeyID: id, Actor: actor})
	k.log.InfoContext(ctx, "join key revoked", "key_id", id)
	return rec.Key, nil
}

// Keys lists every key, oldest first, without secrets.
func (k *Keyring) Keys(ctx context.Context) ([]Key, error) {
	recs, err := k.store.Keys(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]Key, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	return keys, nil
}

// Key returns the key with id, without its secret.
func (k *Keyring) Key(ctx context.Context, id string) (Key, error) {
	rec, err := k.store.Key(ctx, id)
	return rec.Key, err
}

// Audit returns the audit events q selects, oldest first.
func (k *Keyring) Audit(ctx context.Context, q AuditQuery) ([]AuditEvent, error) {
	return k.store.Audit(ctx, q)
}

// audit appends an event. It is written even when the caller's context was
// cancelled (a client that went away): the action it records has already
// happened. A failure to record it is logged, not returned.
func (k *Keyring) audit(ctx context.Context, e AuditEvent) {
	e.At = k.now().UTC()
	k.write(ctx, e)
}

// write appends e as it is.
func (k *Keyring) write(ctx context.Context, e AuditEvent) {
	if err := k.store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		k.log.ErrorContext(ctx, "audit event not stored", "type", e.Type, "key_id", e.KeyID, "hostname", e.Hostname, "err", err)
	}
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// hashToken returns the stored form of a node token's secret part.
func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}
