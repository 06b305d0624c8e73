package auth

import (
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// Operators is the operator-token check every {base}/operator/* route takes: the
// Verifier of [[auth.issuers]] in force, swapped whole by a reload. The composition
// root makes it before any part that has operator routes (docs/architecture.md), and
// hands the same one to each.
type Operators struct {
	opts    Options
	current atomic.Pointer[Verifier]
}

// NewOperators builds the check for issuers; a jwks_file is read now (New).
func NewOperators(issuers []config.Issuer, opts Options) (*Operators, error) {
	v, err := New(issuers, opts)
	if err != nil {
		return nil, err
	}
	o := &Operators{opts: opts}
	o.current.Store(v)
	return o, nil
}

// Verifier is the verifier in force.
func (o *Operators) Verifier() *Verifier { return o.current.Load() }

// Prepare builds the verifier of reloaded issuers and applies nothing (a reload is
// all or nothing); Use applies it.
func (o *Operators) Prepare(issuers []config.Issuer) (*Verifier, error) { return New(issuers, o.opts) }

// Use makes v the verifier in force.
func (o *Operators) Use(v *Verifier) { o.current.Store(v) }

// Middleware guards a route group with the verifier in force at each request.
func (o *Operators) Middleware() gin.HandlerFunc { return Middleware(o.Verifier) }
