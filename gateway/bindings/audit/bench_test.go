package audit_test

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
)

// countingFS is the real file system, counting every sync the spool makes: the
// segments' data syncs and those of the cursor and of directories.
type countingFS struct {
	spool.FS
	n *atomic.Int64
	c *syncClock
}

// syncClock sums the time spent in syncs, by kind: segments, the rest (cursor,
// quarantine files) and directories.
type syncClock struct{ seg, other, dir, nSeg, nOther, nDir atomic.Int64 }

func (k *syncClock) add(sum, n *atomic.Int64, begin time.Time) {
	sum.Add(int64(time.Since(begin)))
	n.Add(1)
}

func (c countingFS) OpenFile(name string, flag int, perm fs.FileMode) (spool.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, n: c.n, c: c.c, seg: strings.HasPrefix(path.Base(name), "seg-")}, nil
}

func (c countingFS) SyncDir(name string) error {
	c.n.Add(1)
	defer c.c.add(&c.c.dir, &c.c.nDir, time.Now())
	return c.FS.SyncDir(name)
}

type countingFile struct {
	spool.File
	n   *atomic.Int64
	c   *syncClock
	seg bool
}

func (f countingFile) Sync() error {
	f.n.Add(1)
	if f.seg {
		defer f.c.add(&f.c.seg, &f.c.nSeg, time.Now())
	} else {
		defer f.c.add(&f.c.other, &f.c.nOther, time.Now())
	}
	return f.File.Sync()
}

// BenchmarkAuditedFederatedSearch is the figure of issue 12: federated searches per
// second through the gateway's server with [audit] delivering to a repository (every
// event synced to its spool before the answer leaves), against the same searches with
// [audit] absent, measured in one run with the same number of concurrent clients, in
// pairs of slices (plain then audited, audited then plain, alternately, so that the
// drift of a shared machine falls on both). It reports both rates, their ratio (goal
// ≥ 0.9) and the spread of the pairs' ratios, the fsyncs per second and per request
// the audited searches took (segments, cursor and directories), the events one
// segment sync covered (group commit) and one delivery carried, the time one sync
// took, and the process's CPU time per request of each side.
//
// Both gateways are built alike; the audited one has [audit] and production's
// delivery: its delivery interval (5 s) and so its linger (50 ms), two deliveries in
// flight, batches of at most 50. After each audited slice, the wait until the
// repository has every event of it is not timed (the linger of the last batch would
// otherwise be charged to the next slice or idle), but its CPU is charged to the
// audited side.
//
// Everything runs in this one process on the same cores: the member, the gateways
// and the repository. repo=double is the test/doubles/auditrepo double, which parses and
// keeps every event and echoes it back, so its work is charged to the audited side;
// repo=minimal answers each batch with 201s without parsing it, so that what remains
// is the gateway's own cost of auditing (building the event, the spool, delivery), as
// with a repository on another machine.
//
// The member answers at once (it runs in this process), so that a search costs little
// more than the gateway's own work and the audit's sync is nearly all of what it adds
// to a search's latency: the hardest case. member=10ms is a member across a network,
// each answer 10 ms later, as a search of real members costs at least; and
// members=3x10ms is what the gateway is for: one search federated over three such
// members.
func BenchmarkAuditedFederatedSearch(b *testing.B) {
	for _, c := range []struct {
		repo    string
		member  time.Duration
		members int
		clients []int
	}{
		{"double", 0, 1, []int{8, 32}},
		{"minimal", 0, 1, []int{8, 32, 64}},
		{"minimal", 10 * time.Millisecond, 1, []int{8, 32}},
		{"minimal", 10 * time.Millisecond, 3, []int{32}},
	} {
		for _, clients := range c.clients {
			name := fmt.Sprintf("repo=%s/clients=%d", c.repo, clients)
			switch {
			case c.members > 1:
				name = fmt.Sprintf("repo=%s/members=%dx%v/clients=%d", c.repo, c.members, c.member, clients)
			case c.member > 0:
				name = fmt.Sprintf("repo=%s/member=%v/clients=%d", c.repo, c.member, clients)
			}
			b.Run(name, func(b *testing.B) { benchAudited(b, clients, c.repo == "minimal", c.member, c.members) })
		}
	}
}

// minimalRepository answers a batch Bundle with one 201 entry per entry, counted
// without parsing the body, and a record sent alone with a 201; it counts the
// requests and the events.
type minimalRepository struct{ requests, events atomic.Int64 }

// bodyBuffers keep the minimal repository's reads from costing the process what a
// repository on another machine would not.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var batchEntryMark = []byte(`"request":{"method":"POST","url":"AuditEvent"}`)

func (m *minimalRepository) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.requests.Add(1)
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer bodyBuffers.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, 2<<20)); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body := buf.Bytes()
	if r.URL.Path == "/AuditEvent" { // a record sent alone
		m.events.Add(1)
		w.WriteHeader(http.StatusCreated)
		return
	}
	n := bytes.Count(body, batchEntryMark)
	m.events.Add(int64(n))
	out := make([]byte, 0, 64+40*n)
	out = append(out, `{"resourceType":"Bundle","type":"batch-response","entry":[`...)
	for i := range n {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"response":{"status":"201 Created"}}`...)
	}
	out = append(out, "]}"...)
	w.Header().Set("Content-Type", "application/fhir+json")
	_, _ = w.Write(out)
}

// benchPairs is how many pairs of slices one measurement takes.
const benchPairs = 20

func benchAudited(b *testing.B, clients int, minimal bool, member time.Duration, members int) {
	var syncs atomic.Int64
	var clock syncClock
	plain := startGateway(b, harnessOptions{waitAfter: spool.DefaultWaitAfter, memberDelay: member, members: members})
	ao := harnessOptions{audit: repositoryTable, fs: countingFS{FS: spool.OS, n: &syncs, c: &clock}, waitAfter: spool.DefaultWaitAfter, memberDelay: member, members: members}
	var mini minimalRepository
	if minimal {
		srv := httptest.NewServer(&mini)
		b.Cleanup(srv.Close)
		ao.arrURL = srv.URL
	}
	audited := startGateway(b, ao)
	requests := func() int64 {
		if minimal {
			return mini.requests.Load()
		}
		return int64(audited.arr.Requests())
	}
	delivered := func() int64 {
		if minimal {
			return mini.events.Load()
		}
		return int64(audited.arr.Stored())
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var seq atomic.Int64
	var sent atomic.Int64 // audited searches answered
	run := func(g *gateway, n int) time.Duration {
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(int64(n))
		begin := time.Now()
		for range clients {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					res, err := client.Get(fmt.Sprintf("%s/fhir/Patient?name=BENCH%d", g.URL, seq.Add(1)))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Errorf("a search answered %d", res.StatusCode)
						return
					}
					if g == audited {
						sent.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return time.Since(begin)
	}
	// settle waits, untimed, until the repository has every event of the audited
	// searches answered so far.
	settle := func() {
		b.StopTimer()
		defer b.StartTimer()
		deadline := time.Now().Add(30 * time.Second)
		for delivered() < sent.Load() {
			if time.Now().After(deadline) {
				b.Fatalf("the repository has %d of %d events", delivered(), sent.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	run(plain, 4*clients) // warm both: connections, the members' first answers
	run(audited, 4*clients)
	settle()
	b.ResetTimer()
	per := max(1, b.N/benchPairs)
	var tPlain, tAudited time.Duration
	var cPlain, cAudited time.Duration
	ratios := make([]float64, 0, benchPairs)
	segSyncs0, syncs0, posts0 := audited.trail.Syncs(), syncs.Load(), requests()
	plainSlice := func() time.Duration {
		c0 := cpuTime()
		d := run(plain, per)
		cPlain += cpuTime() - c0
		tPlain += d
		return d
	}
	auditedSlice := func() time.Duration {
		c0 := cpuTime()
		d := run(audited, per)
		settle()
		cAudited += cpuTime() - c0
		tAudited += d
		return d
	}
	for i := range benchPairs {
		var p, a time.Duration
		if i%2 == 0 {
			p = plainSlice()
			a = auditedSlice()
		} else {
			a = auditedSlice()
			p = plainSlice()
		}
		ratios = append(ratios, p.Seconds()/a.Seconds())
	}
	segSyncs, all, posts := audited.trail.Syncs()-segSyncs0, syncs.Load()-syncs0, requests()-posts0
	b.StopTimer()
	n := float64(per * benchPairs)
	plainRate, auditedRate := n/tPlain.Seconds(), n/tAudited.Seconds()
	slices.Sort(ratios)
	b.ReportMetric(plainRate, "plain_req/s")
	b.ReportMetric(auditedRate, "audited_req/s")
	b.ReportMetric(auditedRate/plainRate, "audited/plain")
	b.ReportMetric(ratios[0], "pair_ratio_min")
	b.ReportMetric((ratios[benchPairs/2-1]+ratios[benchPairs/2])/2, "pair_ratio_median")
	b.ReportMetric(ratios[benchPairs-1], "pair_ratio_max")
	b.ReportMetric(float64(all)/tAudited.Seconds(), "fsyncs/s")
	b.ReportMetric(float64(all)/n, "fsyncs/req")
	b.ReportMetric(n/float64(max(segSyncs, 1)), "events/segment_sync")
	b.ReportMetric(n/float64(max(posts, 1)), "events/delivery")
	b.ReportMetric(float64(cPlain.Microseconds())/n, "cpu_µs/plain_req")
	b.ReportMetric(float64(cAudited.Microseconds())/n, "cpu_µs/audited_req")
	avg := func(sum, n *atomic.Int64) float64 { return float64(sum.Load()) / 1e3 / float64(max(n.Load(), 1)) }
	b.ReportMetric(avg(&clock.seg, &clock.nSeg), "µs/segment_sync")
	b.ReportMetric(avg(&clock.other, &clock.nOther), "µs/cursor_sync")
	b.ReportMetric(avg(&clock.dir, &clock.nDir), "µs/dir_sync")
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
