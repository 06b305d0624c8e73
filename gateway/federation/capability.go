package federation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// The members' CapabilityStatements are asked when a client asks for the gateway's
// (GET {base}/fhir/metadata, written by gateway/capability) and by the ask-all probe,
// never on a timer of the gateway's own. Each of those calls records the member's
// endpoint state, as a federated query does.

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
