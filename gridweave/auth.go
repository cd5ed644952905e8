package gridweave

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/joinkeys"
)

// Role is what a credential allows.
type Role string

const (
	// RoleAdmin: the admin token (Config.AdminToken), or a JWT with role
	// "admin".
	RoleAdmin Role = "admin"
	// RoleUser: a JWT with role "user"; its subject owns KubeTorch jobs.
	RoleUser Role = "user"
	// RoleProvider: a provider join key (verify-provider only).
	RoleProvider Role = "provider"
)

// Principal is who made a request.
type Principal struct {
	Role     Role
	Subject  string // the JWT subject; "admin-token" for the static token
	Provider joinkeys.Provider
}

type principalKey struct{}

// PrincipalFrom returns the principal an authenticated route's request
// carries.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// bearer returns the Authorization header's bearer credential, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// userClaims are the claims of an admin or user JWT.
type userClaims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

type authenticator struct {
	adminTokenHash [32]byte
	hasAdminToken  bool
	secret         []byte
	parser         *jwt.Parser
	claims         *jwt.Validator
	keyring        *joinkeys.Keyring
	now            func() time.Time
}

func newAuthenticator(cfg Config, kr *joinkeys.Keyring, now func() time.Time) *authenticator {
	a := &authenticator{
		secret:  []byte(cfg.JWTSecret),
		keyring: kr,
		now:     now,
		parser:  jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithoutClaimsValidation()),
		claims: jwt.NewValidator(jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
			jwt.WithLeeway(joinkeys.MaxClockSkew), jwt.WithTimeFunc(func() time.Time { return now() })),
	}
	if cfg.AdminToken != "" {
		a.adminTokenHash = sha256.Sum256([]byte(cfg.AdminToken))
		a.hasAdminToken = true
	}
	return a
}

// authenticate names the principal of a bearer credential: the admin
// token (constant-time), an admin or user JWT (HS256 only, exp required
// and exact, iat/nbf with clock-skew leeway), or a provider join key.
// Anything else is errUnauthenticated.
func (a *authenticator) authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, errUnauthenticated
	}
	if a.hasAdminToken {
		sum := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(sum[:], a.adminTokenHash[:]) == 1 {
			return Principal{Role: RoleAdmin, Subject: "admin-token"}, nil
		}
	}
	if strings.Count(token, ".") != 2 {
		return Principal{}, errUnauthenticated
	}
	claims := &userClaims{}
	if _, err := a.parser.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return a.secret, nil }); err != nil {
		return Principal{}, errUnauthenticated
	}
	if claims.Role == "" { // not ours to judge here: perhaps a provider key
		p, err := a.keyring.VerifyProvider(ctx, token)
		if err != nil {
			if errors.Is(err, joinkeys.ErrInvalidInput) || isCredentialError(err) {
				return Principal{}, errUnauthenticated
			}
			return Principal{}, err
		}
		return Principal{Role: RoleProvider, Subject: p.Name, Provider: p}, nil
	}
	if claims.ExpiresAt == nil || !a.now().Before(claims.ExpiresAt.Time) {
		return Principal{}, errUnauthenticated
	}
	if err := a.claims.Validate(claims); err != nil || claims.Subject == "" {
		return Principal{}, errUnauthenticated
	}
	switch Role(claims.Role) {
	case RoleAdmin, RoleUser:
		return Principal{Role: Role(claims.Role), Subject: claims.Subject}, nil
	}
	return Principal{}, errUnauthenticated
}

// isCredentialError reports whether err says a presented key or token is
// not good, as opposed to the ledger failing.
func isCredentialError(err error) bool {
	for _, target := range []error{joinkeys.ErrKeyInvalid, joinkeys.ErrKeyExpired, joinkeys.ErrKeyRevoked,
		joinkeys.ErrKeyNotYetValid, joinkeys.ErrKeyExhausted, joinkeys.ErrNodeTokenInvalid} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

var errForbidden = &apiError{code: api.CodeForbidden, message: "this credential is valid but may not use this route"}

// requireRole wraps h so that only a bearer credential of one of roles
// reaches it: none or an invalid one is 401, another role 403.
func (s *Server) requireRole(h http.Handler, roles ...Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.auth.authenticate(r.Context(), bearer(r))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, role := range roles {
			if p.Role == role {
				h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
				return
			}
		}
		s.writeError(w, r, errForbidden)
	})
}

// requireInternalToken guards an internal route on the public listener:
// only Config.InternalToken opens it there (the internal listener,
// Config.InternalAddr, serves it without credentials). With no internal
// token the route is off here (403).
func (s *Server) requireInternalToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.InternalToken == "" {
			s.writeError(w, r, &apiError{code: api.CodeInternalRoute,
				message: "internal routes are off on this listener: set " + s.cfg.Name("InternalToken") + " to open them here, or call them on " + s.cfg.Name("InternalAddr")})
			return
		}
		if subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.cfg.InternalToken)) != 1 {
			s.writeError(w, r, errUnauthenticated)
			return
		}
		h.ServeHTTP(w, r)
	})
}
