// Package access decides who may use the data plane ({base}/fhir and {base}/nodes):
// with auth.data_plane = "required" (the default) every request carries a bearer token
// that one of [[auth.issuers]] signed, verified as the operator routes verify theirs
// (algorithms, audience, expiry, key rotation) but without asking for the operator
// scope. A refusal is a FHIR answer: 401 (or 403) with a WWW-Authenticate challenge
// and an OperationOutcome that says what to fix and never echoes the token
// (docs/security.md).
package access

import (
	"net/http"
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// Guard is the data plane's door. Its mode follows the configuration in force (a
// reload may turn it either way); its keys are the issuers' in force, the same the
// operator routes use.
type Guard struct {
	required atomic.Bool
	verifier func() *auth.Verifier
}

// New is the guard of cfg, verifying with the Verifier current returns at each
// request (auth.Operators.Verifier: the federation's reload swaps it).
func New(cfg *config.Config, current func() *auth.Verifier) *Guard {
	g := &Guard{verifier: current}
	g.required.Store(cfg.Auth.DataPlaneRequired())
	return g
}

// PrepareReload reads the mode of cfg; the function it returns applies it. It cannot
// fail: cfg is validated, and the issuers are the federation's to prepare.
func (g *Guard) PrepareReload(cfg *config.Config) (func(), error) {
	required := cfg.Auth.DataPlaneRequired()
	return func() { g.required.Store(required) }, nil
}

// Handler verifies each data-plane request's token when the data plane is required,
// and stores the caller's *auth.Principal under auth.PrincipalKey for what follows; an
// open data plane lets every request through with no principal.
func (g *Guard) Handler() gin.HandlerFunc {
	return func(c *gin.Context) {
		if !g.required.Load() {
			c.Next()
			return
		}
		p, e := g.verifier().AuthorizeClient(c.Request)
		if e != nil {
			Refuse(c, e)
			return
		}
		c.Set(auth.PrincipalKey, p)
		c.Next()
	}
}

// Refuse answers e as the data plane does: its status, its challenge, no caching, and
// an OperationOutcome whose issue code is login (401) or forbidden (403).
func Refuse(c *gin.Context, e *auth.Error) {
	c.Header("WWW-Authenticate", e.Challenge())
	c.Header("Cache-Control", "no-store")
	code := "login"
	if e.Status == http.StatusForbidden {
		code = "forbidden"
	}
	fhir.Write(c.Writer, e.Status, fhir.Outcome(code, e.Description))
	c.Abort()
}
