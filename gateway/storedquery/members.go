package storedquery

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/outbound"
)

// Members is how the stored queries reach the members: the federation surface's
// registry and its recorded member calls (*federation.Surface).
type Members interface {
	Members() []string
	CallMember(ctx context.Context, id, method, path string, body []byte, maxBody int64) (federation.MemberExchange, error)
}

// recording is Members whose exchanges about a stored query (the PUT, read and DELETE
// of OperationDefinition/{id}) each record a BALP AuditEvent through rec, the audit
// trail. The CapabilityStatement reads are not recorded.
type recording struct {
	members Members
	rec     bindings.Recorder
	log     logr.Logger
}

func (r recording) Members() []string { return r.members.Members() }

func (r recording) CallMember(ctx context.Context, id, method, path string, body []byte, maxBody int64) (federation.MemberExchange, error) {
	return r.members.CallMember(ctx, id, method, path, body, maxBody)
}

// Limits of the member calls (docs/bindings.md, "Stored queries").
const (
	// CallTimeout bounds each member call.
	CallTimeout = 5 * time.Second
	// maxParallel bounds the members asked at once.
	maxParallel = 8
	// maxCapabilityBytes bounds what is read of a member's CapabilityStatement.
	maxCapabilityBytes = 4 << 20
)

// The results of one member's part in a distribution, a drift check or a repair.
const (
	// Updated: the member took the PUT (2xx).
	Updated = "updated"
	// Deleted: the member took the DELETE (2xx, or 404/410: nothing to delete).
	Deleted = "deleted"
	// InSync: the member's copy has the store's digest.
	InSync = "in-sync"
	// Missing: the member has no copy (404, 410): drift.
	Missing = "missing"
	// Different: the member's copy has another digest: drift.
	Different = "different"
	// Unsupported: the member's CapabilityStatement does not offer update of
	// OperationDefinition; it is never sent a stored query.
	Unsupported = "unsupported"
	// Refused: the member answered, but not 2xx (or with an unusable body).
	Refused = "refused"
	// Unreachable: no answer within CallTimeout.
	Unreachable = "unreachable"
	// AuditFailed: the exchange's audit record could not be stored (the audit
	// trail's spool refused it); its answer is not used.
	AuditFailed = "audit-failed"
)

// MemberResult is one member's part.
type MemberResult struct {
	Result string `json:"result"`
	// Status is the member's HTTP status when it answered.
	Status int `json:"status,omitempty"`
	// Digest is the digest of the member's copy, when one was read.
	Digest string `json:"digest,omitempty"`
}

// exchange is one member call and whether its audit record was stored.
type exchange struct {
	federation.MemberExchange
	// notAudited is true when the exchange's audit record could not be stored: the
	// exchange failed, whatever the member answered.
	notAudited bool
}

// failed is the result of an exchange that is not a usable 2xx.
func failed(ex exchange) MemberResult {
	if ex.notAudited {
		return MemberResult{Result: AuditFailed}
	}
	if ex.Call.Broken {
		return MemberResult{Result: Unreachable}
	}
	return MemberResult{Result: Refused, Status: ex.Call.Status}
}

func ok2xx(ex exchange) bool {
	return !ex.notAudited && !ex.Call.Broken && !ex.Call.Unusable && ex.Call.Status >= 200 && ex.Call.Status < 300
}

// capability is what is read of a member's CapabilityStatement.
type capability struct {
	ResourceType string `json:"resourceType"`
	Rest         []struct {
		Resource []struct {
			Type        string `json:"type"`
			Interaction []struct {
				Code string `json:"code"`
			} `json:"interaction"`
		} `json:"resource"`
	} `json:"rest"`
}

// supports is whether the statement offers update of OperationDefinition (a PUT with
// the client's id).
func (c capability) supports() bool {
	for _, r := range c.Rest {
		for _, res := range r.Resource {
			if res.Type != "OperationDefinition" {
				continue
			}
			for _, in := range res.Interaction {
				if in.Code == "update" {
					return true
				}
			}
		}
	}
	return false
}

// call is one recorded member call within CallTimeout. When m is recording and the
// call is about a stored query (OperationDefinition/{id}) and left the gateway, its
// AuditEvent is recorded; notAudited says it could not be stored.
func call(ctx context.Context, m Members, id, method, path string, body []byte, maxBody int64) exchange {
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	start := time.Now()
	ex, err := m.CallMember(cctx, id, method, path, body, maxBody)
	if err != nil {
		// The member left the registry meanwhile: nothing was sent.
		return exchange{MemberExchange: federation.MemberExchange{Call: outbound.Call{Broken: true, NotSent: true}}}
	}
	out := exchange{MemberExchange: ex}
	r, ok := m.(recording)
	query, about := strings.CutPrefix(path, "/OperationDefinition/")
	if !ok || !about || ex.Call.NotSent {
		return out
	}
	interaction := map[string]string{http.MethodPut: interactionUpdate, http.MethodGet: interactionRead, http.MethodDelete: interactionDelete}[method]
	ev, err := memberEvent(interaction, start, id, query, auditOutcome(ex.Call)).Event()
	if err == nil {
		// The record is stored within CallTimeout, whatever the operator's client does.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), CallTimeout)
		err = r.rec.Record(rctx, ev)
		rcancel()
	}
	if err != nil {
		r.log.Error(err, "The audit record of a stored-query exchange could not be stored", "member", id, "stored_query", query, "interaction", interaction)
		out.notAudited = true
	}
	return out
}

// auditOutcome is the AuditEvent.outcome of a member call: "0" when answered below
// 400, "4" for another answer or an unusable body, "8" for none or a 5xx.
func auditOutcome(c outbound.Call) string {
	switch {
	case c.Broken || c.Status == 0 || c.Status >= 500:
		return "8"
	case c.Status >= 400 || c.Unusable:
		return "4"
	}
	return "0"
}

// eachSupporting asks every member's CapabilityStatement and runs f for those that
// support stored queries, in parallel; the others' result is Unsupported (or why the
// statement could not be read). It returns one result per member.
func eachSupporting(ctx context.Context, m Members, f func(id string) MemberResult) map[string]MemberResult {
	ids := m.Members()
	out := make(map[string]MemberResult, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallel)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var r MemberResult
			ex := call(ctx, m, id, http.MethodGet, "/metadata", nil, maxCapabilityBytes)
			var cs capability
			switch {
			case !ok2xx(ex):
				r = failed(ex)
			case json.Unmarshal(ex.Body, &cs) != nil || cs.ResourceType != "CapabilityStatement" || !cs.supports():
				r = MemberResult{Result: Unsupported}
			default:
				r = f(id)
			}
			mu.Lock()
			out[id] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// distribute PUTs d to every supporting member.
func distribute(ctx context.Context, m Members, d *Definition) map[string]MemberResult {
	return eachSupporting(ctx, m, func(id string) MemberResult { return put(ctx, m, id, d) })
}

func put(ctx context.Context, m Members, id string, d *Definition) MemberResult {
	ex := call(ctx, m, id, http.MethodPut, "/OperationDefinition/"+d.ID, d.Raw, MaxDefinitionBytes)
	if !ok2xx(ex) {
		return failed(ex)
	}
	return MemberResult{Result: Updated, Status: ex.Call.Status}
}

// withdraw DELETEs the query id from every supporting member.
func withdraw(ctx context.Context, m Members, id string) map[string]MemberResult {
	return eachSupporting(ctx, m, func(member string) MemberResult {
		ex := call(ctx, m, member, http.MethodDelete, "/OperationDefinition/"+id, nil, MaxDefinitionBytes)
		if ok2xx(ex) || (!ex.notAudited && !ex.Call.Broken && (ex.Call.Status == http.StatusNotFound || ex.Call.Status == http.StatusGone)) {
			return MemberResult{Result: Deleted, Status: ex.Call.Status}
		}
		return failed(ex)
	})
}

// compare reads the member's copy of d: InSync, Missing, Different, or why it could
// not be read. A copy missing or different is drift, and the member is up: it
// answered (CallMember records it so).
func compare(ctx context.Context, m Members, id string, d *Definition) MemberResult {
	ex := call(ctx, m, id, http.MethodGet, "/OperationDefinition/"+d.ID, nil, MaxDefinitionBytes)
	switch {
	case !ex.notAudited && !ex.Call.Broken && (ex.Call.Status == http.StatusNotFound || ex.Call.Status == http.StatusGone):
		return MemberResult{Result: Missing, Status: ex.Call.Status}
	case !ok2xx(ex):
		return failed(ex)
	}
	digest, err := Digest(ex.Body)
	if err != nil {
		return MemberResult{Result: Different, Status: ex.Call.Status}
	}
	if digest != d.Digest {
		return MemberResult{Result: Different, Status: ex.Call.Status, Digest: digest}
	}
	return MemberResult{Result: InSync, Status: ex.Call.Status, Digest: digest}
}

// checkAll compares every stored query on every supporting member: one statement
// read per member, then its copies.
func checkAll(ctx context.Context, m Members, defs []*Definition) map[string]map[string]MemberResult {
	out := make(map[string]map[string]MemberResult, len(defs))
	for _, d := range defs {
		out[d.ID] = map[string]MemberResult{}
	}
	var mu sync.Mutex
	perMember := eachSupporting(ctx, m, func(member string) MemberResult {
		for _, d := range defs {
			r := compare(ctx, m, member, d)
			mu.Lock()
			out[d.ID][member] = r
			mu.Unlock()
		}
		return MemberResult{Result: InSync}
	})
	for member, r := range perMember {
		if r.Result == InSync {
			continue
		}
		for _, d := range defs {
			out[d.ID][member] = r
		}
	}
	return out
}

// repair PUTs d again on every supporting member and reads the copy back: the
// result's digest is the member's copy's after the repair.
func repair(ctx context.Context, m Members, d *Definition) map[string]MemberResult {
	return eachSupporting(ctx, m, func(id string) MemberResult {
		if r := put(ctx, m, id, d); r.Result != Updated {
			return r
		}
		return compare(ctx, m, id, d)
	})
}
