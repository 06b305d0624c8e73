package access

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ferrofed/ferrofed/gateway/smart"
)

// Call is a data-plane request as the decision reads it: what it asks of which FHIR
// API, never who asks (that is the grants').
type Call struct {
	// Routed is a request to one member ({base}/nodes/{id}/fhir/...), Member's;
	// otherwise it is the federated surface ({base}/fhir/...).
	Routed bool
	Member string
	// Method is the HTTP method.
	Method string
	// Path is the path under the FHIR base, without its leading slash and with empty
	// segments dropped: "Observation", "Patient/1/_history", "" for the base.
	Path string
	// Params are the search parameters: the URL's query, and a POST _search's form.
	Params url.Values
	// IfNoneExist is the If-None-Exist header of a create.
	IfNoneExist string
	// Entries are the requests of a transaction or batch Bundle POSTed to a member's
	// base, read by the caller; nil for anything else.
	Entries []smart.Entry
}

// Verdict is the decision on a Call.
type Verdict struct {
	// Status is 0 when the call may go on, else the status to answer: 403 (a scope it
	// lacks, named by Needed) or 404 (a patient the token may not know of).
	Status int
	// Needed is the scope a 403 lacked, in canonical v2 form; "" when none would do.
	Needed string
	// Reason says why, for the OperationOutcome; never a token or a patient's data
	// beyond the ids the caller sent.
	Reason string
	// Add are the search parameters the gateway adds before the call goes on: a
	// patient-level token's patient.
	Add url.Values
	// Drop are the _include and _revinclude values of types the token may not read:
	// removed before the call goes on.
	Drop []string
	// Confirm, when not empty, are the searches a read (vread, instance history) of one
	// resource must find it by, any one of them, before it goes on: the member is asked
	// {type}?_id={id}&{search}, and a resource no search finds is a 404. A read that
	// rests on a restricted scope, or on a patient context, is decided by what the
	// member holds, which only the member can tell.
	Confirm []url.Values
}

// Decide decides call for a token's grants and its patient claim ("" for none), by
// the rules of docs/security.md ("Scopes on the data plane"): the interaction needs
// its permissions on its type, on either surface; a search's _type, chains and
// reverse chains need a search of the types they reach; an included type the token
// may not read is dropped; a transaction is decided entry by entry; and a decision
// at the patient level confines the call to the token's patient.
func Decide(g smart.Grants, patient string, call Call) Verdict {
	if call.Entries != nil {
		return decideEntries(g, call.Entries)
	}
	e, ok := classify(call)
	switch {
	case ok:
	case !call.Routed:
		// The federated surface answers what it does not serve with an error of its
		// own (404, 405, 400), asking no member.
		return Verdict{}
	case operation(call.Path) != "":
		return decideOperation(g, call.Path)
	default:
		// A path the gateway cannot tell the interaction of goes to the member only for
		// a token that may do everything there.
		if !mayDoEverything(g, "*") {
			return refuse("system/*.cruds", "the gateway cannot tell which interaction this request is: only a token that may do everything on every type may send it")
		}
		return Verdict{}
	}
	if e.Interaction == smart.SearchSystem && e.Params.Has("_type") {
		return decideTypes(g, e.Params)
	}
	d := g.AllowEntry(e)
	if !d.Allowed {
		return refuse(d.Needed, d.Reason)
	}
	var v Verdict
	if e.Interaction == smart.SearchType || e.Interaction == smart.SearchSystem {
		if v = decideReach(g, e); v.Status != 0 {
			return v
		}
	}
	if d.Level == smart.LevelPatient {
		pv := confine(patient, e, call, d.Restrictions)
		pv.Drop = v.Drop
		return pv
	}
	if len(d.Restrictions) > 0 {
		if !readsOne(e.Interaction) {
			return refuse("", "a scope with a query allows the searches that match it and the reads of what such a search finds, nothing else")
		}
		return Verdict{Confirm: d.Restrictions}
	}
	return v
}

// readsOne reports whether an interaction reads one resource by its id: a read, a
// vread, an instance history.
func readsOne(i smart.Interaction) bool {
	return i == smart.Read || i == smart.VRead || i == smart.HistoryInstance
}

// classify reads a call as the entry of a Bundle would be read; a compartment search
// (Patient/{id}/{type}) is the search of {type} for that patient.
func classify(call Call) (smart.Entry, bool) {
	method := call.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	segs := strings.Split(call.Path, "/")
	if len(segs) == 3 && segs[0] == "Patient" && method == http.MethodGet && smart.InCompartment(segs[2]) {
		params := cloneValues(call.Params)
		names, _ := smart.CompartmentParams(segs[2])
		params.Add(names[0], "Patient/"+segs[1])
		return smart.Entry{ResourceType: segs[2], Interaction: smart.SearchType, Params: params}, true
	}
	target := call.Path
	if len(call.Params) > 0 {
		target += "?" + call.Params.Encode() // a conditional interaction's criteria
	}
	e, ok := smart.ParseEntry(method, target, call.IfNoneExist)
	if !ok {
		return e, false
	}
	if e.Interaction == smart.SearchType || e.Interaction == smart.SearchSystem {
		e.Params = call.Params // the form's too, for a POST _search
	}
	return e, true
}

// operation is the name of the operation a path calls ($everything), "" for none.
func operation(path string) string {
	segs := strings.Split(path, "/")
	if last := segs[len(segs)-1]; strings.HasPrefix(last, "$") {
		return last
	}
	return ""
}

// decideOperation allows an operation only to a token that may do everything on its
// type (every type, at the base): what an operation reads and writes is the
// operation's to say, not the gateway's to guess.
func decideOperation(g smart.Grants, path string) Verdict {
	t := "*"
	if segs := strings.Split(path, "/"); len(segs) > 1 {
		t = segs[0]
	}
	if mayDoEverything(g, t) {
		return Verdict{}
	}
	return refuse("system/"+t+".cruds", "an operation needs every permission on its type, at the user or system level")
}

// mayDoEverything reports whether the token holds, at the user or the system level
// and unrestricted, every permission on type t ("*": an unrestricted * grant of every
// permission).
func mayDoEverything(g smart.Grants, t string) bool {
	for _, level := range []smart.Level{smart.LevelSystem, smart.LevelUser} {
		if t == "*" {
			if slices.ContainsFunc(g.List(), func(gr smart.Grant) bool {
				return gr.Level == level && gr.Type == "*" && gr.Perms == smart.PermAll && gr.Query == nil
			}) {
				return true
			}
			continue
		}
		if !slices.ContainsFunc([]smart.Interaction{smart.Create, smart.Read, smart.Update, smart.Delete, smart.SearchType}, func(i smart.Interaction) bool {
			d := g.AllowAt(level, t, i)
			return !d.Allowed || len(d.Restrictions) > 0
		}) {
			return true
		}
	}
	return false
}

// decideEntries decides a transaction or batch: every entry must be allowed, at the
// user or system level (a patient-level write is not confined here, so it is refused).
func decideEntries(g smart.Grants, entries []smart.Entry) Verdict {
	if i, d := g.FirstRefusal(entries); i >= 0 {
		return refuse(d.Needed, fmt.Sprintf("entry %d of the Bundle: %s", i, d.Reason))
	}
	for i, e := range entries {
		if d := g.AllowEntry(e); d.Level == smart.LevelPatient || len(d.Restrictions) > 0 {
			return refuse("", fmt.Sprintf("entry %d of the Bundle rests on a patient-level or restricted scope, which a transaction cannot be confined to", i))
		}
	}
	return Verdict{}
}

func refuse(needed, reason string) Verdict {
	return Verdict{Status: http.StatusForbidden, Needed: needed, Reason: reason}
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v)+1)
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}
