// Package access decides who may use the data plane ({base}/fhir and {base}/nodes):
// with auth.data_plane = "required" (the default) every request carries a bearer token
// that one of [[auth.issuers]] signed, verified as the operator routes verify theirs
// (algorithms, audience, expiry, key rotation) but without asking for the operator
// scope. A refusal is a FHIR answer: 401 (or 403) with a WWW-Authenticate challenge
// and an OperationOutcome that says what to fix and never echoes the token
// (docs/security.md).
package access

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/smart"
)

// Guard is the data plane's door. Its mode follows the configuration in force (a
// reload may turn it either way); its keys are the issuers' in force, the same the
// operator routes use.
type Guard struct {
	required atomic.Bool
	verifier func() *auth.Verifier
	bounds   atomic.Pointer[bounds]
	patients Patients
	members  Members
}

// Members are the federation's members as the guard asks them whether they hold a
// resource (federation.Surface.Get): a read that rests on a patient context or a
// restricted scope goes on only once its member finds it by the searches the scopes
// allow (Verdict.Confirm). Get answers the member's status and body, or an error
// when there was none; the error for an id no member has has a NoMember method that
// returns true (the route then answers its 404).
type Members interface {
	Get(ctx context.Context, member, path, rawQuery string) (int, []byte, error)
}

// noMember is the error Members give for an id no member has.
type noMember interface{ NoMember() bool }

// Patients is the patient-scoped flow (*patient.Flow) as the guard asks it about a
// routed request: the same questions a federated search's first page is asked.
type Patients interface {
	PlanRouted(ctx context.Context, r patient.Routed) patient.RoutedVerdict
}

// bounds are what the guard reads of a configuration besides its mode: where the
// data plane is, and how much of a body it reads to decide.
type bounds struct {
	// prefix is the base path without its trailing slash.
	prefix string
	// formBytes bounds a POST _search's form (limits.max_query_bytes), bundleBytes a
	// transaction Bundle (limits.max_routed_body_buffer_bytes).
	formBytes, bundleBytes int64
}

func boundsOf(cfg *config.Config) *bounds {
	return &bounds{prefix: strings.TrimSuffix(cfg.Server.BasePath, "/"), formBytes: int64(cfg.Limits.MaxQueryBytes),
		bundleBytes: cfg.Limits.MaxRoutedBodyBufferBytes}
}

// New is the guard of cfg, verifying with the Verifier current returns at each
// request (auth.Operators.Verifier: the federation's reload swaps it). patients, when
// not nil, decides every routed request that names a patient; members answer whether
// a member holds what a confined read asks for.
func New(cfg *config.Config, current func() *auth.Verifier, patients Patients, members Members) *Guard {
	g := &Guard{verifier: current, patients: patients, members: members}
	g.required.Store(cfg.Auth.DataPlaneRequired())
	g.bounds.Store(boundsOf(cfg))
	return g
}

// PrepareReload reads the mode of cfg; the function it returns applies it. It cannot
// fail: cfg is validated, and the issuers are the federation's to prepare.
func (g *Guard) PrepareReload(cfg *config.Config) (func(), error) {
	required, b := cfg.Auth.DataPlaneRequired(), boundsOf(cfg)
	return func() { g.required.Store(required); g.bounds.Store(b) }, nil
}

// Handler guards the FHIR APIs of the data plane ({base}/fhir, {base}/nodes/{id}/fhir),
// SMART discovery ({base}/fhir/.well-known/smart-configuration) aside, when it is
// required: it verifies the request's token, decides what its scopes allow
// (Decide), answers a refusal itself, applies what the decision adds or drops, and
// stores the caller's *auth.Principal under auth.PrincipalKey for what follows. An
// open data plane, and the data plane's other routes (the PMIR feed checks its own
// token), let every request through.
func (g *Guard) Handler() gin.HandlerFunc {
	return func(c *gin.Context) {
		b := g.bounds.Load()
		call, fhirAPI, decidable := callOf(c.Request, b.prefix)
		if !fhirAPI || (!call.Routed && call.Path == smart.DiscoveryPath) {
			c.Next() // SMART discovery is read before a client holds a token
			return
		}
		if !g.required.Load() {
			// Open: a token that verifies still names its caller in the evidence.
			var p *auth.Principal
			if c.Request.Header.Get("Authorization") != "" {
				if p, _ = g.verifier().AuthorizeClient(c.Request); p != nil {
					c.Set(auth.PrincipalKey, p)
				}
			}
			if decidable && g.askPatients(c, call, p) {
				c.Next()
			}
			return
		}
		p, e := g.verifier().AuthorizeClient(c.Request)
		if e != nil {
			Refuse(c, e)
			return
		}
		c.Set(auth.PrincipalKey, p)
		if !decidable {
			c.Next() // the route refuses it, asking no member
			return
		}
		if !readBodies(c, &call, b) {
			return
		}
		v := Decide(smart.Parse(p.Scopes), p.Patient, call)
		switch v.Status {
		case 0:
		case http.StatusNotFound:
			fhir.Write(c.Writer, http.StatusNotFound, fhir.Outcome("not-found", v.Reason))
			c.Abort()
			return
		default:
			Refuse(c, &auth.Error{Status: v.Status, Code: "insufficient_scope", Description: refusal(v), Scope: v.Needed})
			return
		}
		if len(v.Drop) > 0 {
			if call.Routed { // a member's answer is passed on as it is: no outcome entry can say what was dropped
				Refuse(c, &auth.Error{Status: http.StatusForbidden, Code: "insufficient_scope",
					Description: "the token may not read what " + strings.Join(v.Drop, ", ") + " would include"})
				return
			}
			note := fhir.Outcome("suppressed", "dropped "+strings.Join(v.Drop, ", ")+": the token may not read what it would include")
			note.Issue[0].Severity = "warning"
			c.Set(fhir.NotesKey, [][]byte{fhir.OutcomeEntry(note)})
		}
		rewrite(c.Request, v)
		if len(v.Confirm) > 0 && !g.confirm(c, call, v.Confirm) {
			return
		}
		if g.askPatients(c, call, p) {
			c.Next()
		}
	}
}

// askPatients puts a routed request that names a patient to the patient-scoped flow,
// and reports whether it goes on; when it does not, the flow answered it.
func (g *Guard) askPatients(c *gin.Context, call Call, p *auth.Principal) bool {
	if g.patients == nil || !call.Routed {
		return true
	}
	r := patient.Routed{Member: c.Param("node"), Method: call.Method, RawQuery: c.Request.URL.RawQuery}
	if call.Path != "" {
		r.Segs = strings.Split(call.Path, "/")
	}
	postSearch := call.Method == http.MethodPost && strings.HasSuffix(call.Path, "/_search")
	if postSearch { // the search's parameters are its query's and its form's
		form, ok := peek(c, g.bounds.Load().formBytes, "the form body is longer than limits.max_query_bytes")
		if !ok {
			return false
		}
		r.RawQuery = strings.Trim(r.RawQuery+"&"+strings.TrimSpace(string(form)), "&")
	}
	r.Issuer, r.Subject = p.Requester()
	v := g.patients.PlanRouted(c.Request.Context(), r)
	if v.Answer != nil {
		v.Answer(c.Writer)
		c.Abort()
		return false
	}
	switch {
	case v.RawQuery != "" && postSearch:
		c.Request.URL.RawQuery = ""
		c.Request.Body = io.NopCloser(strings.NewReader(v.RawQuery))
		c.Request.ContentLength = int64(len(v.RawQuery))
	case v.RawQuery != "":
		c.Request.URL.RawQuery = v.RawQuery
	}
	return true
}

// confirm asks the member of a read whether it finds the resource by one of
// searches, and reports whether the read goes on; when it does not, confirm answered
// it: a 404 when the member does not find it (as if it did not exist), a 502 when the
// member could not say. A federated read names its member by the federated id; one
// that names none goes on to the route's 404.
func (g *Guard) confirm(c *gin.Context, call Call, searches []url.Values) bool {
	member, id := readOf(call)
	if member == "" {
		return true
	}
	if g.members == nil {
		Refuse(c, &auth.Error{Status: http.StatusForbidden, Code: "insufficient_scope",
			Description: "the gateway cannot ask the member whether the resource is within the token's scopes: search for it instead"})
		return false
	}
	found, err := finds(c.Request.Context(), g.members, member, strings.Split(call.Path, "/")[0], id, searches)
	var none noMember
	switch {
	case errors.As(err, &none) && none.NoMember():
		return true // the route's 404
	case err != nil:
		fhir.Write(c.Writer, http.StatusBadGateway, fhir.Outcome("transient", err.Error()))
	case !found:
		fhir.Write(c.Writer, http.StatusNotFound, fhir.Outcome("not-found", notFound.Reason))
	default:
		return true
	}
	c.Abort()
	return false
}

// refusal is a 403's description: the reason, and the scope that would do.
func refusal(v Verdict) string {
	if v.Needed == "" {
		return v.Reason
	}
	return v.Reason + " (needs " + v.Needed + ")"
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
