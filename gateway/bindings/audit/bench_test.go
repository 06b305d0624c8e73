package audit_test

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
)

// countingFS is the real file system, counting every sync the spool makes: the
// segments' data syncs and those of the cursor and of directories.
type countingFS struct {
	spool.FS
	n *atomic.Int64
}

func (c countingFS) OpenFile(name string, flag int, perm fs.FileMode) (spool.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, n: c.n}, nil
}

func (c countingFS) SyncDir(name string) error { c.n.Add(1); return c.FS.SyncDir(name) }

type countingFile struct {
	spool.File
	n *atomic.Int64
}

func (f countingFile) Sync() error { f.n.Add(1); return f.File.Sync() }

// BenchmarkAuditedFederatedSearch is the figure of issue 12: federated searches per
// second through the gateway's server with [audit] delivering to a repository (every
// event synced to its spool before the answer leaves), against the same searches with
// [audit] absent, measured in one run, interleaved in slices, with the same number of
// concurrent clients. It reports both rates, their ratio (goal ≥ 0.9), the fsyncs per
// second the audited searches took (segments, cursor and directories) and the events
// one segment sync covered (group commit). The repository double runs in the same
// process, so its work is charged to the audited side.
func BenchmarkAuditedFederatedSearch(b *testing.B) {
	for _, clients := range []int{8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchAudited(b, clients) })
	}
}

func benchAudited(b *testing.B, clients int) {
	var syncs atomic.Int64
	plain := startGateway(b, harnessOptions{})
	audited := startGateway(b, harnessOptions{audit: repositoryTable, fs: countingFS{FS: spool.OS, n: &syncs}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var seq atomic.Int64
	run := func(g *gateway, n int) time.Duration {
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(int64(n))
		begin := time.Now()
		for range clients {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					res, err := client.Get(fmt.Sprintf("%s/fhir/Patient?name=BENCH%d", g.url, seq.Add(1)))
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
				}
			})
		}
		wg.Wait()
		return time.Since(begin)
	}
	run(plain, 4*clients) // warm both: connections, the members' first answers
	run(audited, 4*clients)
	b.ResetTimer()
	const slices = 4
	per := max(1, b.N/slices)
	var tPlain, tAudited time.Duration
	segSyncs0, syncs0 := audited.trail.Syncs(), syncs.Load()
	for range slices {
		tPlain += run(plain, per)
		tAudited += run(audited, per)
	}
	segSyncs, all := audited.trail.Syncs()-segSyncs0, syncs.Load()-syncs0
	b.StopTimer()
	n := float64(per * slices)
	plainRate, auditedRate := n/tPlain.Seconds(), n/tAudited.Seconds()
	b.ReportMetric(plainRate, "plain_req/s")
	b.ReportMetric(auditedRate, "audited_req/s")
	b.ReportMetric(auditedRate/plainRate, "audited/plain")
	b.ReportMetric(float64(all)/tAudited.Seconds(), "fsyncs/s")
	b.ReportMetric(n/float64(max(segSyncs, 1)), "events/segment_sync")
}
