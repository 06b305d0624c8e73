package tracing

import (
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The attribute keys a span of the gateway may carry: the one allow-list
// (docs/tracing.md, "What is recorded"). Spans are made with these keys only, and the
// exporter's filter (Filter) drops every other key, event and link before a byte
// leaves the process: a value that is a search parameter's, a body, a patient's id, a
// token, a credential or a member's URL has no key to go under.
const (
	// HTTP semantic conventions (server and client spans).
	AttrMethod     = attribute.Key("http.request.method")
	AttrRoute      = attribute.Key("http.route")
	AttrStatusCode = attribute.Key("http.response.status_code")
	AttrScheme     = attribute.Key("url.scheme")
	AttrBodySize   = attribute.Key("http.response.body.size")
	// AttrQueryParameters are the NAMES of the query's parameters, sorted, at most
	// MaxQueryParameterNames (queryNames): never a value.
	AttrQueryParameters = attribute.Key("ferrofed.query.parameters")
	// A member call's (gateway/outbound, gateway/federation): the member's configured
	// id and its outcome as in meta.federation. Never its URL.
	AttrMemberID      = attribute.Key("ferrofed.member.id")
	AttrMemberOutcome = attribute.Key("ferrofed.member.outcome")
	// AttrBinding is a binding exchange's report key (demographics, resolver, ...).
	AttrBinding = attribute.Key("ferrofed.binding")
	// AttrBindingOutcome is a binding exchange's outcome as ferrofed_binding_requests_total
	// labels it (success, redirect, client_error, server_error, no_answer), or a spool
	// append's (stored, failed).
	AttrBindingOutcome = attribute.Key("ferrofed.binding.outcome")
	// AttrCount is an event's count (the members a merge took answers from, the
	// identities a step resolved): a number, never a value.
	AttrCount = attribute.Key("ferrofed.count")
	// The drain's (lifecycle.TerminationMessage).
	AttrDrainOutcome        = attribute.Key("ferrofed.drain.outcome")
	AttrDrainCutConnections = attribute.Key("ferrofed.drain.cut_connections")
	AttrDrainAbandoned      = attribute.Key("ferrofed.drain.abandoned")
	AttrDrainBudgetMS       = attribute.Key("ferrofed.drain.budget_ms")
)

// allowedAttributes is the allow-list of attribute keys, for spans and events alike.
var allowedAttributes = map[attribute.Key]bool{
	AttrMethod: true, AttrRoute: true, AttrStatusCode: true, AttrScheme: true, AttrBodySize: true,
	AttrQueryParameters: true, AttrMemberID: true, AttrMemberOutcome: true, AttrBinding: true,
	AttrBindingOutcome: true, AttrCount: true,
	AttrDrainOutcome: true, AttrDrainCutConnections: true, AttrDrainAbandoned: true, AttrDrainBudgetMS: true,
}

// Span names that are not a server span's "METHOD {route}".
const (
	SpanDrain               = "drain"
	SpanDrainDelay          = "drain.delay"
	SpanDrainListenerClosed = "drain.listener_closed"
	SpanDrainInFlight       = "drain.in_flight"
	SpanDrainBindings       = "drain.bindings"
	// SpanMemberCall is a member call's client span (the federation's, later).
	SpanMemberCall = "member call"
	// SpanBindingPrefix starts a binding exchange's client span: "binding " + its key.
	SpanBindingPrefix = "binding "
	// SpanSpoolAppend is the internal span of an audit event's append to a spool (its
	// write and sync), with the destination's key and the outcome.
	SpanSpoolAppend = "audit spool append"
)

// allowedSpanNames are the fixed span names; a server span's name is checked by
// serverSpanName, a binding's by its prefix and key syntax.
var allowedSpanNames = map[string]bool{
	SpanDrain: true, SpanDrainDelay: true, SpanDrainListenerClosed: true, SpanDrainInFlight: true,
	SpanDrainBindings: true, SpanMemberCall: true, SpanSpoolAppend: true,
}

// Event names: the page-token, merge and identity steps of a search, on its server
// span; none carries free text, at most AttrCount.
const (
	EventPageToken = "page_token"
	EventMerge     = "merge"
	EventIdentity  = "identity"
)

// allowedEvents are the event names a span may carry.
var allowedEvents = map[string]bool{"page_token": true, "merge": true, "identity": true}

// redactedName replaces a span name the allow-list does not know.
const redactedName = "(not allowed)"

// Allowed reports whether a span may carry the attribute key k.
func Allowed(k attribute.Key) bool { return allowedAttributes[k] }

// AllowedSpanName reports whether a span may be exported under name: a fixed name, a
// binding's client span, or a server span named by a route the middleware served
// (routes): a raw path that looks like a template is not one of them.
func AllowedSpanName(name string, routes *Routes) bool {
	if allowedSpanNames[name] {
		return true
	}
	if key, ok := strings.CutPrefix(name, SpanBindingPrefix); ok {
		return key != "" && len(key) <= 64 && strings.IndexFunc(key, func(r rune) bool { return r != '_' && (r < 'a' || r > 'z') }) < 0
	}
	return routes.known(name)
}

// Routes are the server span names the middleware made: "METHOD {route template}",
// the template gin's router matched, one of the gateway's registered routes, so the
// set is bounded by them.
type Routes struct{ names sync.Map }

func (r *Routes) add(name string) {
	if _, ok := r.names.Load(name); !ok {
		r.names.Store(name, struct{}{})
	}
}

func (r *Routes) known(name string) bool {
	if r == nil {
		return false
	}
	_, ok := r.names.Load(name)
	return ok
}

// keep returns the attributes of kvs the allow-list takes (kvs itself when all are).
func keep(kvs []attribute.KeyValue) []attribute.KeyValue {
	for i, kv := range kvs {
		if !allowedAttributes[kv.Key] {
			out := append([]attribute.KeyValue(nil), kvs[:i]...)
			for _, kv := range kvs[i+1:] {
				if allowedAttributes[kv.Key] {
					out = append(out, kv)
				}
			}
			return out
		}
	}
	return kvs
}

// Filter is the allow-list applied to spans about to be exported, the defence in
// depth behind spans made with allowed keys only: a span name it does not know is
// replaced, every attribute, event and event attribute it does not know is dropped,
// links are dropped, the status keeps its code without its description (an error's
// text), and the resource is res.
func Filter(spans []sdktrace.ReadOnlySpan, res *resource.Resource, routes *Routes) []sdktrace.ReadOnlySpan {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		st := tracetest.SpanStubFromReadOnlySpan(s)
		if !AllowedSpanName(st.Name, routes) {
			st.Name = redactedName
		}
		st.Attributes = keep(st.Attributes)
		events := st.Events[:0:0]
		for _, e := range st.Events {
			if allowedEvents[e.Name] {
				e.Attributes = keep(e.Attributes)
				events = append(events, e)
			}
		}
		st.Events, st.Links = events, nil
		st.Status.Description = ""
		st.Resource = res
		out[i] = st.Snapshot()
	}
	return out
}
