// Package pmir is the identity feed of the gateway (docs/bindings.md, "Identity feed"):
// the [pmir] table. It holds an IHE PMIR ITI-94 Subscription at a Patient Identity
// Registry, checks it on an interval, deletes it in drain step 4, and receives the
// ITI-93 Mobile Patient Identity Feed on POST {base}/pmir/$process-message.
//
// # The subscription
//
// At start it first searches for one a killed instance left behind,
// `GET {url}/Subscription?url=<endpoint>&criteria=<criteria>` (R4's `url` search
// parameter is the channel endpoint): one of ours (same endpoint, criteria and channel
// type, compared exactly) in requested or active is reused, every other one of ours is
// deleted. A registry that does not support the search (any 4xx) is asked to create.
// Then POST {url}/Subscription with status requested, channel type message, the
// gateway's endpoint and payload application/fhir+json (IHE.PMIR.Subscription.Request);
// the answer's Location (relative, or absolute on the registry's own origin), or its
// id, names the subscription from then on. Every pmir.check_interval_ms it is read
// back; one that vanished (404, 410) is created again at once. In drain step 4 it is
// deleted within server.bindings_drain_timeout_ms: 2xx, 404 and 410 are done; any
// other answer, or none before the budget ran out, leaves it at the registry, and the
// gateway logs a warning naming the subscription's id (the server also lists the
// binding as abandoned when its delete outlasts the budget).
//
// # The state rule (report key identity_registry, fault identity_registry_fault)
//
//	create or read shows requested or active                       up
//	any 4xx or 5xx; a subscription in error or off                 failing   refused
//	a 2xx whose body is not our Subscription (not JSON, another
//	  resource, criteria or channel altered), a 3xx, past the cap  failing   malformed
//	a create without Location and without id, or whose Location
//	  is on another origin: it could be neither read nor deleted   failing   unmanageable
//	an exchange's audit record not stored                          failing   audit-failed
//	refused, reset, past pmir.timeout_ms                           down      unreachable
//	before the first exchange                                      unknown
//
// A create the gateway cannot manage is not repeated (each would leave another
// subscription behind): later checks only search for it.
//
// # The feed
//
// POST {base}/pmir/$process-message takes a bearer token of one of [[auth.issuers]]
// carrying pmir.feed_scope (401 without a valid token, 403 without the scope), and a
// PMIR message Bundle of at most 1 MiB: entry[0] a MessageHeader with eventUri
// urn:ihe:iti:pmir:2019:patient-feed, entry[1] a history Bundle of Patient changes.
// A message that merges (a PUT of a Patient with active false and a replaced-by
// link), updates (another PUT) or deletes a patient clears the resolver's and the
// consent pre-filter's caches whole: a merge names the surviving patient by reference
// only, so the cache keys (identifiers) cannot be picked out. The answer is ITI-93's:
// 200 with a message Bundle whose one MessageHeader (eventUri
// urn:ihe:iti:pmir:2019:patient-feed-response) answers the request's id with code ok;
// 400 with an OperationOutcome for a message that is not PMIR's; 503 when its audit
// record could not be stored (the registry sends it again).
//
// Every exchange records a BALP AuditEvent through the audit trail: create, read,
// search (with its query) and delete with ITI-94 as second subtype, each feed message
// with ITI-93. In drain step 4 the audit destinations close their spools once the
// delete ended (StopBefore), so that its record is stored too.
package pmir

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// Key is the binding's report key and its surface's name.
const Key = "identity_registry"

// The classes of identity_registry_fault.
const (
	FaultUnreachable  = "unreachable"
	FaultRefused      = "refused"
	FaultMalformed    = "malformed"
	FaultUnmanageable = "unmanageable"
	FaultAuditFailed  = "audit-failed"
)

// MaxAnswerBytes caps what is read of a registry's answer.
const MaxAnswerBytes = 64 << 10

// Options build a Feed.
type Options struct {
	// Logger receives the binding's logs.
	Logger logr.Logger
	// Recorder stores each exchange's AuditEvent (the audit trail); nil stores nothing.
	Recorder bindings.Recorder
	// Metrics counts the exchanges with the registry; nil counts nothing.
	Metrics *bindings.Metrics
	// Tracker is the dependency report the feed's state goes into, "unknown" until
	// its first exchange; required.
	Tracker *dependencies.Tracker
	// Invalidate is called for each feed message that merges, updates or deletes a
	// patient: it clears the resolver's and the consent pre-filter's caches.
	Invalidate func()
	// Auth tunes the verifier of the feed's tokens (tests).
	Auth auth.Options
	// Transport, when set, is the client's base transport (tests).
	Transport *http.Transport
}

// Feed is the identity feed of one gateway.
type Feed struct {
	cfg        config.PMIR
	base       string   // the registry's FHIR base, without a trailing slash
	origin     *url.URL // scheme and host of base
	client     *bindings.Client
	verifier   *auth.Verifier
	rec        bindings.Recorder
	log        logr.Logger
	invalidate func()
	tracker    *dependencies.Tracker

	mu sync.Mutex
	// held is the subscription's URL (without _history), "" when none is held; id is
	// its logical id.
	held, id string
	// searched is true once the search for a leftover got an answer.
	searched bool
	// unmanageable is true after a create the gateway could not manage: it is not
	// repeated, later checks search for it.
	unmanageable bool

	cancel context.CancelFunc
	done   chan struct{}
	// stopped is closed when Stop returned (StopBefore).
	stopped  chan struct{}
	stopOnce sync.Once
	stopErr  error
	// outcome is what drain step 4 did: "deleted", "none", "left".
	outcome atomic.Value
}

// New builds the feed [pmir] describes, reading its credential files; nothing is sent
// (`config check` calls it too). Nil without [pmir].
func New(cfg *config.Config, o Options) (*Feed, error) {
	if cfg == nil || cfg.PMIR == nil {
		return nil, nil
	}
	p := *cfg.PMIR
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	base := strings.TrimSuffix(p.URL, "/")
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("pmir.url: %w", err)
	}
	c, err := bindings.NewClient(bindings.ClientOptions{
		Name: Key, Table: "pmir", Timeout: p.Timeout(), MaxResponseBytes: MaxAnswerBytes,
		Credentials: p.Credentials, Metrics: o.Metrics, Transport: o.Transport,
	})
	if err != nil {
		return nil, err
	}
	v, err := auth.New(cfg.Auth.Issuers, o.Auth)
	if err != nil {
		return nil, fmt.Errorf("pmir: the feed's token verifier: %w", err)
	}
	o.Tracker.SetService(Key, dependencies.Unknown, "")
	return &Feed{cfg: p, base: base, origin: &url.URL{Scheme: u.Scheme, Host: u.Host}, client: c, verifier: v,
		rec: o.Recorder, log: o.Logger, invalidate: o.Invalidate, tracker: o.Tracker,
		done: make(chan struct{}), stopped: make(chan struct{})}, nil
}

// set puts the state of one observation in the report.
func (f *Feed) set(s dependencies.State, fault string) {
	f.tracker.SetService(Key, s, fault)
}

// Start starts the subscription's process: the search for a leftover, the create and
// the checks. Drain step 4 stops it (Stop).
func (f *Feed) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.run(ctx)
	return nil
}

func (f *Feed) run(ctx context.Context) {
	defer close(f.done)
	f.ensure(ctx)
	t := time.NewTicker(f.cfg.CheckInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.ensure(ctx)
		}
	}
}

// ensure is one check: search for a leftover until a search was answered (and after
// a create the gateway could not manage), then read the subscription held, or create
// one when none is held or the one held vanished.
func (f *Feed) ensure(ctx context.Context) {
	f.mu.Lock()
	searched, unmanageable := f.searched, f.unmanageable
	f.mu.Unlock()
	if (!searched || unmanageable) && !f.adopt(ctx) {
		return
	}
	if held := f.current(); held != "" {
		if vanished := f.check(ctx, held); !vanished {
			return
		}
	} else if f.isUnmanageable() {
		return
	}
	f.create(ctx)
}

func (f *Feed) isUnmanageable() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unmanageable
}

// current is the subscription held, "" when none.
func (f *Feed) current() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

// hold makes u (id) the subscription held; "" lets it go.
func (f *Feed) hold(u, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held, f.id = u, id
	if u != "" {
		f.unmanageable = false
	}
}

// Stop is drain step 4: the checks stop, then the subscription held is deleted. The
// delete is bounded by pmir.timeout_ms, not by ctx (the bindings budget): Stop
// returns when it has ended, so that a delete still running when the budget ran out
// is abandoned by the server under the binding's name; the binding itself logs a
// warning naming the subscription's id then, and when the delete failed.
func (f *Feed) Stop(ctx context.Context) error {
	f.stopOnce.Do(func() {
		defer close(f.stopped)
		f.stopErr = f.stop(ctx)
	})
	return f.stopErr
}

func (f *Feed) stop(ctx context.Context) error {
	if f.cancel != nil {
		f.cancel()
		<-f.done
	}
	f.mu.Lock()
	held, id := f.held, f.id
	f.mu.Unlock()
	if held == "" {
		f.outcome.Store("none")
		f.log.Info("Stopped the identity feed: no PMIR subscription held, none to delete")
		return nil
	}
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-ended:
		case <-ctx.Done():
			f.log.Error(errors.New("the delete of the PMIR subscription outlasted server.bindings_drain_timeout_ms"),
				"Warning: abandoned the PMIR subscription; it may be left at the registry, which may go on sending the feed",
				"subscription", id)
		}
	}()
	ex, _ := f.exchange(context.WithoutCancel(ctx), http.MethodDelete, held, nil, interactionDelete, "Subscription/"+id)
	switch {
	case ex.Answered && (ex.Status/100 == 2 || ex.Status == http.StatusNotFound || ex.Status == http.StatusGone):
		f.hold("", "")
		f.outcome.Store("deleted")
		f.log.Info("Deleted the PMIR subscription", "subscription", id, "status", ex.Status)
		return nil
	case ctx.Err() != nil:
		// Past the budget: the warning is logged, the server abandons the binding.
		f.outcome.Store("left")
		return fmt.Errorf("delete of PMIR subscription %s: past the bindings budget", id)
	}
	f.outcome.Store("left")
	why := "no answer"
	if ex.Answered {
		why = fmt.Sprintf("answered %d", ex.Status)
	}
	f.log.Error(fmt.Errorf("delete of the PMIR subscription: %s", why),
		"Warning: could not delete the PMIR subscription; it may be left at the registry", "subscription", id)
	return fmt.Errorf("delete of PMIR subscription %s: %s", id, why)
}

// StopReport is what drain step 4's log line says of the binding.
func (f *Feed) StopReport() []any {
	if o, ok := f.outcome.Load().(string); ok {
		return []any{Key + "_subscription", o}
	}
	return nil
}
