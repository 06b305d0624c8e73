// Command boundsload runs the attacks of issues 11 and 30 against a built ferrofed
// binary and reports the gateway's peak resident memory under each (VmHWM of
// /proc/<pid>/status, a fresh process per attack), the liveness p99 during the fan-out
// flood against the same process idle, and what the slow-body attack leaves the
// member's other clients. hack/bounds-load.sh builds the binaries and runs it; see
// there. Every attack is bounded: a fixed number of requests, each with a timeout.
//
//	boundsload -binary B [-baseline] [-attack entries|fanout|query|headers|slowbody|slowdrain|all]
//
// -baseline writes configurations without the [limits] table, for a binary that
// predates it.
//
// The attacks:
//
//	entries  4 members each answering 16 MiB of `{}` entries; 3 searches at once
//	fanout   2,000 members served by 4 loopback listeners; 300 searches at once;
//	         liveness probed every 2 ms meanwhile, and 200 times before, idle
//	query    4 members; 100 searches at once, each with a 900 KB query
//	slowbody 1 member that reads a request's whole body before it answers (as a FHIR
//	         server reads a form or a resource); for 20 s, 40 connections each send a
//	         routed form POST head with Content-Length: 5 and never the body (a new
//	         one as soon as one is answered), while other clients GET a routed read
//	         of that member every 100 ms and a federated search every 500 ms (open
//	         loop), each within 10 s (the request timeout); their answered ratio,
//	         p50 and p99 (an unanswered request counts as its 10 s), and the
//	         member's state after
//	slowdrain the slowbody attack with server.drain_delay_ms = 500, a routed read every
//	         50 ms; 3 s in, SIGTERM: of the reads sent before it, how many were
//	         answered 200, and how the process exited
//	headers  4 members each answering with an 8 MiB head (issue 30's header bomb);
//	         50 searches at once
//
// Nothing here is used by the gateway or the operator themselves.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	binary := flag.String("binary", "", "the ferrofed binary to attack")
	baseline := flag.Bool("baseline", false, "the binary predates [limits]: leave it out of the configuration")
	attack := flag.String("attack", "all", "entries, fanout, query, headers, slowbody, slowdrain or all")
	flag.Parse()
	if *binary == "" {
		fmt.Fprintln(os.Stderr, "boundsload: -binary is required")
		os.Exit(2)
	}
	attacks := map[string]func(*gateway) string{"entries": entries, "fanout": fanout, "query": query, "headers": headers, "slowbody": slowbody, "slowdrain": slowdrain}
	names := []string{"entries", "fanout", "query", "headers", "slowbody", "slowdrain"}
	if *attack != "all" {
		if attacks[*attack] == nil {
			fmt.Fprintf(os.Stderr, "boundsload: no attack %q\n", *attack)
			os.Exit(2)
		}
		names = []string{*attack}
	}
	for _, n := range names {
		g := &gateway{binary: *binary, baseline: *baseline}
		note := attacks[n](g)
		fmt.Printf("%-8s binary=%s idle_rss=%dMiB peak_rss=%dMiB %s\n", n, filepath.Base(*binary), g.idleRSS>>20, g.peakRSS>>20, note)
	}
}

// gateway is one ferrofed serve process.
type gateway struct {
	binary   string
	baseline bool
	// server is more of the [server] table, as TOML lines.
	server  string
	cmd     *exec.Cmd
	url     string
	idleRSS int64
	peakRSS int64
}

// start writes a configuration with the given members and limits and starts the
// gateway, returning once it is ready.
func (g *gateway) start(memberURLs []string, limits string) {
	dir, err := os.MkdirTemp("", "boundsload")
	check(err)
	port := freePort()
	var b strings.Builder
	fmt.Fprintf(&b, "[server]\nlisten = \"127.0.0.1:%d\"\nbase_path = \"/\"\nrequest_timeout_ms = 10000\ntermination_message_path = \"\"\n%s", port, g.server)
	if !g.baseline && limits != "" {
		b.WriteString("[limits]\n" + limits + "\n")
	}
	for i, u := range memberURLs {
		fmt.Fprintf(&b, "[[registry.members]]\nid = \"m%d\"\nquery_endpoint = %q\n", i, u)
	}
	cfg := filepath.Join(dir, "ferrofed.toml")
	check(os.WriteFile(cfg, []byte(b.String()), 0o600))
	g.cmd = exec.Command(g.binary, "serve", "--config", cfg)
	g.cmd.Stdout, g.cmd.Stderr = io.Discard, io.Discard
	check(g.cmd.Start())
	g.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(g.url + "/health/readiness")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			g.stop()
			check(errors.New("the gateway did not become ready"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.idleRSS = g.status("VmRSS")
}

// stop reads the peak RSS and ends the process.
func (g *gateway) stop() {
	g.peakRSS = g.status("VmHWM")
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
}

// status reads a kB field of /proc/<pid>/status, in bytes.
func (g *gateway) status(field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// flood sends n GETs of url at once, each within timeout, and counts the answers.
func flood(url string, n int, timeout time.Duration) map[string]int {
	return floodFor(url, n, 0, timeout)
}

// floodFor is flood by n clients that each send their next GET as soon as the last
// was answered, until d has passed (0: one GET each).
func floodFor(url string, n int, d, timeout time.Duration) map[string]int {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range n {
		wg.Go(func() {
			for first := true; first || time.Now().Before(end); first = false {
				floodOne(client, url, &mu, counts)
			}
		})
	}
	wg.Wait()
	client.CloseIdleConnections()
	return counts
}

func floodOne(client *http.Client, url string, mu *sync.Mutex, counts map[string]int) {
	{
		{
			key := "error"
			res, err := client.Get(url)
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				key = strconv.Itoa(res.StatusCode)
			} else if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Timeout") {
				key = "timeout"
			} else if firstError.CompareAndSwap(nil, &err) {
				fmt.Fprintln(os.Stderr, "boundsload: first client error:", err)
			}
			mu.Lock()
			counts[key]++
			mu.Unlock()
		}
	}
}

func summary(c map[string]int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, c[k]))
	}
	return "answers=" + strings.Join(parts, ",")
}

// serve starts a loopback HTTP server for h and returns its base URL.
func serve(h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	// The driver's own fds run out when a gateway opens thousands of connections to
	// its members (the baseline's fan-out does): accept errors are not reported.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String()
}

// oneMatch is a member's page of one match; noMatch one of none (a first page over
// 2,000 members that each had more than it takes could not link its next page: the
// token would list them all, past MaxPageTokenBytes).
const (
	oneMatch = `{"resourceType":"Bundle","type":"searchset","total":1,"entry":[{"fullUrl":"x","resource":{"resourceType":"Patient","id":"1"},"search":{"mode":"match"}}]}`
	noMatch  = `{"resourceType":"Bundle","type":"searchset","total":0}`
)

func entries(g *gateway) string {
	const head, tail = `{"resourceType":"Bundle","type":"searchset","entry":[`, `{}]}`
	const size = 16<<20 - 1024
	body := []byte(head + strings.Repeat("{},", (size-len(head)-len(tail))/3) + tail)
	base := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/fhir+json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	var urls []string
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("%s/m%d/fhir", base, i))
	}
	g.start(urls, "")
	defer g.stop()
	return summary(flood(g.url+"/fhir/Patient", 3, 60*time.Second))
}

func headers(g *gateway) string {
	pad := strings.Repeat("b", 1000)
	base := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for i := range 8 << 10 { // 8,192 headers of about 1 KiB: 8 MiB
			h["X-Bomb-"+strconv.Itoa(i)] = []string{pad}
		}
		h.Set("Content-Type", "application/fhir+json")
		_, _ = io.WriteString(w, oneMatch)
	}))
	var urls []string
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("%s/m%d/fhir", base, i))
	}
	g.start(urls, "")
	defer g.stop()
	return summary(flood(g.url+"/fhir/Patient", 50, 60*time.Second))
}

func query(g *gateway) string {
	base := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/fhir+json")
		_, _ = io.WriteString(w, oneMatch)
	}))
	var urls []string
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("%s/m%d/fhir", base, i))
	}
	g.start(urls, "")
	defer g.stop()
	return summary(flood(g.url+"/fhir/Patient?name="+strings.Repeat("a", 900_000), 100, 30*time.Second))
}

func fanout(g *gateway) string {
	var served atomic.Int64
	var bases []string
	for range 4 {
		bases = append(bases, serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			time.Sleep(5 * time.Millisecond)
			w.Header().Set("Content-Type", "application/fhir+json")
			_, _ = io.WriteString(w, noMatch)
		})))
	}
	var urls []string
	for i := range 2000 {
		urls = append(urls, fmt.Sprintf("%s/m%d/fhir", bases[i%len(bases)], i))
	}
	// 2,000 members is past the default limits.max_registry_members (1000): the one
	// limit raised, so that the rest are the defaults.
	g.start(urls, "max_registry_members = 2000")
	defer g.stop()

	idle := probeLiveness(g.url, 200, nil)
	stop := make(chan struct{})
	busy := make(chan []time.Duration, 1)
	go func() { busy <- probeLiveness(g.url, 0, stop) }()
	counts := flood(g.url+"/fhir/Patient", 300, 30*time.Second)
	close(stop)
	during := <-busy
	return fmt.Sprintf("%s member_calls=%d liveness_idle_p99=%s liveness_flood_p99=%s liveness_flood_probes=%d liveness_flood_failed=%d",
		summary(counts), served.Load(), p99(idle), p99(during), len(during), failedProbes.Load())
}

var (
	failedProbes atomic.Int64
	firstError   atomic.Pointer[error]
)

// probeLiveness GETs /health every 2 ms, n times or until stop, each within 5 s, and
// returns the latencies of the answered ones (a failure counts in failedProbes).
func probeLiveness(url string, n int, stop chan struct{}) []time.Duration {
	client := &http.Client{Timeout: 5 * time.Second}
	var out []time.Duration
	for i := 0; n == 0 || i < n; i++ {
		if stop != nil {
			select {
			case <-stop:
				return out
			default:
			}
		}
		start := time.Now()
		res, err := client.Get(url + "/health")
		if err != nil {
			failedProbes.Add(1)
		} else {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				out = append(out, time.Since(start))
			} else {
				failedProbes.Add(1)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return out
}

func p99(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*99/100].Round(100 * time.Microsecond).String()
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "boundsload:", err)
		os.Exit(1)
	}
}

// slowbody is the attack of issue 30, point 1: slow clients that each held one of a
// member's limits.max_member_calls_per_member calls for the whole request timeout.
func slowbody(g *gateway) string {
	const (
		slow    = 40
		victims = 4
		attack  = 20 * time.Second
		budget  = 10 * time.Second // the request timeout of every configuration here
	)
	g.start([]string{bodyReader() + "/m0/fhir"}, "")
	defer g.stop()
	end := time.Now().Add(attack)
	var wg sync.WaitGroup
	slowCounts := slowClients(&wg, g.url, slow, end, budget)
	time.Sleep(500 * time.Millisecond) // the slow heads are in
	type result struct {
		took   time.Duration
		status int
	}
	var mu sync.Mutex
	var routed, federated []result
	client := &http.Client{Timeout: budget, Transport: &http.Transport{MaxIdleConnsPerHost: victims + 1}}
	ask := func(url string, into *[]result) {
		start := time.Now()
		status := 0
		if res, err := client.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			status = res.StatusCode
		}
		took := time.Since(start)
		if status == 0 {
			took = budget
		}
		mu.Lock()
		*into = append(*into, result{took, status})
		mu.Unlock()
	}
	// Open loop: the other clients come at their own pace, whether or not the last
	// was answered (a closed loop would count a burst of quick answers at each turn
	// of the slow clients, and few while they hold the slots).
	for i := 0; time.Now().Before(end); i++ {
		wg.Go(func() { ask(g.url+"/nodes/m0/fhir/Patient/1", &routed) })
		if i%5 == 0 {
			wg.Go(func() { ask(g.url+"/fhir/Patient", &federated) })
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	state := memberState(g.url)
	describe := func(name string, rs []result) string {
		ok := 0
		var took []time.Duration
		counts := map[string]int{}
		for _, r := range rs {
			took = append(took, r.took)
			if r.status == 200 {
				ok++
			}
			k := strconv.Itoa(r.status)
			if r.status == 0 {
				k = "timeout"
			}
			counts[k]++
		}
		return fmt.Sprintf("%s_answered=%d/%d %s_p50=%s %s_p99=%s %s_%s", name, ok, len(rs), name, quantile(took, 50), name, quantile(took, 99), name, summary(counts))
	}
	return fmt.Sprintf("%s %s slow_%s member_state=%s", describe("routed", routed), describe("federated", federated), summary(slowCounts.counts()), state)
}

// bodyReader is a member that reads a request's whole body before it answers, as a
// FHIR server reads a form or a resource; it returns its base URL.
func bodyReader() string {
	return serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Type", "application/fhir+json")
		if strings.HasSuffix(r.URL.Path, "/Patient") || strings.HasSuffix(r.URL.Path, "/_search") {
			_, _ = io.WriteString(w, oneMatch)
			return
		}
		_, _ = io.WriteString(w, `{"resourceType":"Patient","id":"1"}`)
	}))
}

// counter counts answers by key.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
}

func (c *counter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// slowClients runs n connections to the gateway at url until end, each sending a
// routed form POST head that announces a 5-byte body and never sending the body; a
// connection that is answered (or fails) is replaced by a new one. Their answers are
// counted by status.
func slowClients(wg *sync.WaitGroup, url string, n int, end time.Time, budget time.Duration) *counter {
	const head = "POST /nodes/m0/fhir/Patient/_search HTTP/1.1\r\nHost: gw.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5\r\n\r\n"
	host := strings.TrimPrefix(url, "http://")
	c := &counter{}
	for range n {
		wg.Go(func() {
			for time.Now().Before(end) {
				conn, err := net.Dial("tcp", host)
				if err != nil {
					c.add("dial-error")
					time.Sleep(100 * time.Millisecond)
					continue
				}
				_ = conn.SetDeadline(end.Add(budget + 2*time.Second))
				if _, err := io.WriteString(conn, head); err == nil {
					if res, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
						c.add(strconv.Itoa(res.StatusCode))
						res.Body.Close()
					} else {
						c.add("error")
					}
				}
				conn.Close()
			}
		})
	}
	return c
}

// slowdrain is the slowbody attack with a drain in the middle: SIGTERM 3 s in, and
// what became of the routed reads sent before it.
func slowdrain(g *gateway) string {
	const (
		slow    = 40
		victims = 100 // at once, at most: one read every 50 ms, each within 10 s
		budget  = 10 * time.Second
	)
	g.server = "drain_delay_ms = 500\n"
	g.start([]string{bodyReader() + "/m0/fhir"}, "")
	// Stopped by SIGTERM below, not by g.stop; its peak RSS read just before.
	var sigAt time.Time
	var mu sync.Mutex
	type sent struct {
		at     time.Time
		status int
	}
	var log []sent
	var slowWG, wg sync.WaitGroup
	attackEnd := time.Now().Add(3500 * time.Millisecond)
	slowCounts := slowClients(&slowWG, g.url, slow, attackEnd, budget)
	time.Sleep(500 * time.Millisecond) // the slow heads are in
	client := &http.Client{Timeout: budget, Transport: &http.Transport{MaxIdleConnsPerHost: victims}}
	// Open loop: a routed read every 50 ms, for 3 s before SIGTERM and 1.5 s after.
	ask := func() {
		at := time.Now()
		status := 0
		if res, err := client.Get(g.url + "/nodes/m0/fhir/Patient/1"); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			status = res.StatusCode
		}
		mu.Lock()
		log = append(log, sent{at, status})
		mu.Unlock()
	}
	sig := time.Now().Add(3 * time.Second)
	for time.Now().Before(sig) {
		wg.Go(ask)
		time.Sleep(50 * time.Millisecond)
	}
	g.peakRSS = g.status("VmHWM")
	mu.Lock()
	sigAt = time.Now()
	mu.Unlock()
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- g.cmd.Wait() }()
	for after := time.Now().Add(1500 * time.Millisecond); time.Now().Before(after); {
		wg.Go(ask)
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	exit := "none within 30 s"
	select {
	case err := <-exited:
		exit = "0"
		if err != nil {
			exit = err.Error()
		}
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		if err := <-exited; err != nil {
			exit += " (killed: " + err.Error() + ")"
		}
	}
	slowWG.Wait()
	before, ok := 0, 0
	counts := map[string]int{}
	for _, s := range log {
		if !s.at.Before(sigAt) {
			continue
		}
		before++
		if s.status == 200 {
			ok++
		}
		k := strconv.Itoa(s.status)
		if s.status == 0 {
			k = "none"
		}
		counts[k]++
	}
	return fmt.Sprintf("sent_before_sigterm=%d answered_200=%d before_sigterm_%s slow_%s exit=%s", before, ok, summary(counts), summary(slowCounts.counts()), exit)
}

// quantile is the q-th percentile of d.
func quantile(d []time.Duration, q int) string {
	if len(d) == 0 {
		return "none"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)].Round(100 * time.Microsecond).String()
}

// memberState is member m0's state in the gateway's metrics.
func memberState(url string) string {
	res, err := http.Get(url + "/metrics")
	if err != nil {
		return "no-metrics"
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "ferrofed_dependency_state{") && strings.Contains(line, `endpoint="m0-query"`) && strings.HasSuffix(line, " 1") {
			_, s, _ := strings.Cut(line, `state="`)
			s, _, _ = strings.Cut(s, `"`)
			return s
		}
	}
	return "absent"
}
