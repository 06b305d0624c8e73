package auth

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// PrincipalKey is the gin context key under which Middleware stores the *Principal of
// a verified request.
const PrincipalKey = "ferrofed.auth.principal"

// PrincipalOf is the caller a guard verified and stored under PrincipalKey, nil for
// none.
func PrincipalOf(c *gin.Context) *Principal {
	v, _ := c.Get(PrincipalKey)
	p, _ := v.(*Principal)
	return p
}

// Requester is the issuer and subject the bindings and the audit trail name p by,
// both "" for no principal (anonymous).
func (p *Principal) Requester() (issuer, subject string) {
	if p == nil {
		return "", ""
	}
	return p.Issuer, p.Subject
}

// Middleware guards a route group with the Verifier current() returns at each request
// (a SIGHUP reload swaps it). A refused request is answered 401 or 403 with a
// WWW-Authenticate challenge and a JSON body {"error", "error_description"}, and goes
// no further.
func Middleware(current func() *Verifier) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, e := current().Authorize(c.Request)
		if e == nil && p.ReadOnly && c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
			p, e = nil, ErrReadOnly
		}
		if e != nil {
			c.Header("WWW-Authenticate", e.Challenge())
			c.Header("Cache-Control", "no-store")
			code := e.Code
			if code == "" {
				code = "unauthorized"
			}
			c.AbortWithStatusJSON(e.Status, gin.H{"error": code, "error_description": e.Description})
			return
		}
		c.Set(PrincipalKey, p)
		c.Next()
	}
}

// Middleware guards a route group with v.
func (v *Verifier) Middleware() gin.HandlerFunc { return Middleware(func() *Verifier { return v }) }

// AuthorizeClient is Authorize for the data plane (VerifyClient): a verified token,
// whatever its scopes.
func (v *Verifier) AuthorizeClient(r *http.Request) (*Principal, *Error) {
	return v.authorize(r, anyScope)
}

// Authorize verifies r's Authorization header. More than one Authorization header is
// refused: which one a proxy in front read is anyone's guess.
func (v *Verifier) Authorize(r *http.Request) (*Principal, *Error) { return v.authorize(r, "") }

func (v *Verifier) authorize(r *http.Request, scope string) (*Principal, *Error) {
	values := r.Header.Values("Authorization")
	switch {
	case !v.Configured():
		return nil, ErrNoIssuer
	case len(values) == 0:
		return nil, ErrMissing
	case len(values) > 1:
		return nil, ErrMalformed
	}
	return v.verify(r.Context(), values[0], scope)
}
