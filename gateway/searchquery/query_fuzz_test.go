package searchquery

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// FuzzParseSearch feeds the search-parameter parser any query a client can send (as
// the URL's query or a form body). It must never panic; a query it refuses is a 400
// naming a parameter; one it accepts resolves _count within federation.max_count,
// sends members a query no longer than a bounded multiple of what came in, and reads
// the same again from the query it sends (what a member gets is what the client
// asked, re-escaped once).
func FuzzParseSearch(f *testing.F) {
	for _, seed := range []string{
		"", "name=smith", "name=smith&_count=5", "_count=0", "_summary=count", "_count=100000",
		"_sort=-birthdate,_id", "_sort=nosuchkey", "_count=1&_count=2", "_page=abc&_page=def",
		"birthdate=ge2000-01-01&gender=female&_format=json", "identifier=http%3A%2F%2Fx%7C1",
		"%zz=1", "=1", "&&&", "name=%E2%9C%93", "a=b=c", strings.Repeat("a=1&", 101),
		"_include=Patient:organization&_revinclude=Observation:subject",
	} {
		f.Add(seed)
	}
	const defCount, maxCount = config.DefaultCount, config.DefaultMaxCount
	f.Fuzz(func(t *testing.T, raw string) {
		q, qerr := Parse("Patient", raw, defCount, maxCount, config.DefaultMaxQueryBytes)
		if qerr != nil {
			if qerr.Status != 400 || len(qerr.Outcome.Issue) == 0 || qerr.Outcome.Issue[0].Diagnostics == "" {
				t.Fatalf("a refusal of %q is %d %+v", raw, qerr.Status, qerr.Outcome)
			}
			return
		}
		if len(raw) > config.DefaultMaxQueryBytes {
			t.Fatalf("a query of %d bytes was accepted", len(raw))
		}
		if q.Count < 1 || q.Count > maxCount {
			t.Fatalf("%q resolved _count to %d", raw, q.Count)
		}
		mq := q.MemberQuery()
		// Every byte is escaped to at most three, plus the gateway's own _count,
		// _sort and _summary.
		if len(mq) > 3*len(raw)+64 {
			t.Fatalf("%q (%d bytes) asks members %d bytes", raw, len(raw), len(mq))
		}
		if _, err := url.ParseQuery(mq); err != nil {
			t.Fatalf("the member query %q of %q is not a query: %v", mq, raw, err)
		}
		// The client's parameters, read again, are what they were: the member gets
		// them re-escaped once, never altered (the gateway's own _count and _sort come
		// on top, and may take a query of 100 parameters to 102).
		kept := strings.Join(q.Kept, "&")
		again, aerr := Parse("Patient", kept, defCount, maxCount, 4*config.DefaultMaxQueryBytes)
		if aerr != nil {
			t.Fatalf("the kept parameters %q of %q are refused: %+v", kept, raw, aerr.Outcome)
		}
		if strings.Join(again.Kept, "&") != kept || again.SummaryCount != q.SummaryCount {
			t.Fatalf("%q reads as %+v, its kept parameters %q as %+v", raw, q, kept, again)
		}
	})
}
