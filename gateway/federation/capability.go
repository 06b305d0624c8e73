package federation

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
)

// The gateway's own CapabilityStatement (GET {base}/fhir/metadata): what a client can
// search through it, which is what every member that describes itself has in common.
// The members' statements are asked when a client asks for the gateway's and by the
// ask-all probe, never on a timer of the gateway's own, and kept for
// federation.capability_ttl_ms. Each of those calls records the member's endpoint
// state, as a federated query does.

// capabilities caches the common part of the members' statements.
type capabilities struct {
	mu       sync.Mutex
	at       time.Time
	reg      *registry
	common   []fhir.SearchType
	answered int
}

// metadata asks every member's /metadata in parallel within budget (and its own
// timeout_ms), as many at once as cs's limits allow, records each one's state, and
// returns the probe records and the statements of the members that answered one.
func (c *caller) metadata(ctx context.Context, cs *calls, reg *registry, budget time.Duration) ([]ProbeRecord, []*fhir.MemberCapability) {
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	members := reg.members
	exchanges := make([]exchange, len(members))
	records := make([]ProbeRecord, len(members))
	statements := make([]*fhir.MemberCapability, len(members))
	absorb := func(i int) {
		m, ex := members[i], exchanges[i]
		exchanges[i] = exchange{}
		if !ex.call.Broken && !ex.call.Unusable && ex.call.Status >= 200 && ex.call.Status < 300 {
			var st fhir.MemberCapability
			if err := json.Unmarshal(ex.body, &st); err != nil || st.ResourceType != "CapabilityStatement" {
				ex.call.Unusable = true
			} else {
				statements[i] = &st
			}
		}
		records[i] = ProbeRecord{ID: m.id, Outcome: c.observe(m, ex.call), Status: ex.call.Status, DurationMS: millis(ex.duration)}
	}
	cs.FanOut(rctx, len(members), func(i int) {
		m := members[i]
		mctx, cancel := m.within(rctx)
		defer cancel()
		exchanges[i] = c.get(mctx, ctx, m, m.url("/metadata", ""), cs, nil)
	}, absorb, func(i int) {
		exchanges[i] = notSent(rctx, ctx)
		absorb(i)
	})
	return records, statements
}

// store keeps the common part of a round of statements.
func (cp *capabilities) store(reg *registry, statements []*fhir.MemberCapability, now time.Time) {
	var got []*fhir.MemberCapability
	for _, s := range statements {
		if s != nil {
			got = append(got, s)
		}
	}
	common := fhir.CommonCapabilities(got)
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.at, cp.reg, cp.common, cp.answered = now, reg, common, len(got)
}

// cached is the common part, when it is younger than ttl and of this registry.
func (cp *capabilities) cached(reg *registry, ttl time.Duration, now time.Time) ([]fhir.SearchType, int, bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.reg != reg || ttl <= 0 || now.Sub(cp.at) >= ttl {
		return nil, 0, false
	}
	return cp.common, cp.answered, true
}

func sortKeyDocAll() string {
	s := ""
	for i, k := range searchquery.SortKeys() {
		if i > 0 {
			s += ", "
		}
		s += k
	}
	return s
}
