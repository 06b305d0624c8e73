package process_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/test/controlplane"
)

// Polling's benchmark (docs/operator.md, "The operator reads its pods"): 1,000
// Gateways of 3 ready replicas each, their pods answered by one loopback server that
// stands in for the two routes, the shipped operator run with polling off and on.
const (
	pollReplicas = 3
	// benchPollInterval is the operator's --dependency-poll-interval in the run with
	// polling on; pollWindow how long its steady state is measured.
	benchPollInterval = 15 * time.Second
	pollWindow        = 45 * time.Second
	pollNamespace     = "bench-poll"
	operatorNamespace = "ferrofed-system"
)

// podServer stands in for every gateway pod: the readiness answer, and a dependency
// report of three members and two bindings for a request with a bearer token (401
// without one). It counts what it answered.
type podServer struct {
	url                string
	port               int
	readiness, reports atomic.Int64
	refused            atomic.Int64
}

func startPodServer(b *testing.B) *podServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ps := &podServer{url: "http://" + l.Addr().String(), port: l.Addr().(*net.TCPAddr).Port}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health/readiness", func(w http.ResponseWriter, _ *http.Request) {
		ps.readiness.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ready","phase":"serving"}`))
	})
	mux.HandleFunc("GET /operator/dependencies", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ey") {
			ps.refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		ps.reports.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"endpoints":{"a-query":"up","b-query":"up","c-query":"up"},"consent":"up","audit_repository":"up"}`))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close() })
	return ps
}

// BenchmarkOperatorPolling1000Gateways runs the operator twice on a fresh control plane,
// with --dependency-poll-interval=0 and 15s: each time 1,000 Gateways are created and
// reconciled (timed against the apiserver floor of the same run), then 3,000 ready
// pods appear, and the steady state is measured for 45 s: the operator's CPU, its peak
// anonymous memory, the polls it held per second against the 200 its interval asks
// for, and its writes.
func BenchmarkOperatorPolling1000Gateways(b *testing.B) {
	controlplane.Require(b, false)
	bin := buildOperator(b)
	interval := benchPollInterval
	if v := os.Getenv("FERROFED_BENCH_POLL_INTERVAL"); v != "" { // e.g. 30s, the default
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		interval = d
	}
	for i := 0; i < b.N; i++ {
		ctx := context.Background()
		if os.Getenv("FERROFED_BENCH_POLL_ONLY") == "1" { // profiling the polls alone
			fmt.Printf("bench (polling %s): %s\n", interval, pollRun(b, ctx, bin, interval))
			continue
		}
		// The floor makes the writes of these Gateways (3 replicas: a PodDisruptionBudget
		// each), before and after the operator's runs, and the ratios are against their
		// mean (as in benchProcess: the machine's speed drifts within a run).
		floorBefore, _ := floor(b, ctx, gateways, pollShape(0))
		off := pollRun(b, ctx, bin, 0)
		on := pollRun(b, ctx, bin, interval)
		floorAfter, _ := floor(b, ctx, gateways, pollShape(0))
		floorTook := (floorBefore + floorAfter) / 2
		want := float64(gateways*pollReplicas) / interval.Seconds()
		fmt.Printf("bench (polling): floor %s before, %s after, %s their mean (%.0f %% apart)\n", floorBefore.Round(time.Millisecond),
			floorAfter.Round(time.Millisecond), floorTook.Round(time.Millisecond), 100*math.Abs(floorAfter.Seconds()-floorBefore.Seconds())/floorTook.Seconds())
		for _, r := range []pollFigures{off, on} {
			fmt.Printf("bench (polling %s): %s; %.2f× the floor\n", r.interval, r, r.reconciled.Seconds()/floorTook.Seconds())
		}
		fmt.Printf("bench (polling): on against off: CPU in the window %.2f s against %.2f s, peak anonymous memory %.1f MiB against %.1f MiB; %.1f polls/s held of the %.0f/s the interval asks for\n",
			on.windowCPU, off.windowCPU, on.anon, off.anon, on.pollsPerSecond, want)
		b.ReportMetric(on.reconciled.Seconds()/floorTook.Seconds(), "time/floor-polling")
		b.ReportMetric(on.anon, "MiB-anon-polling")
		b.ReportMetric(off.anon, "MiB-anon-off")
		b.ReportMetric(on.windowCPU, "s-cpu-window-polling")
		b.ReportMetric(off.windowCPU, "s-cpu-window-off")
		b.ReportMetric(on.pollsPerSecond, "polls/s")
		if on.pollsPerSecond < 0.9*want {
			b.Errorf("the operator held %.1f polls/s, under 90 %% of the %.0f/s its interval asks for", on.pollsPerSecond, want)
		}
		if on.refused > 0 || off.polls > 0 {
			b.Errorf("%d polls without a token; %d polls with polling off", on.refused, off.polls)
		}
		if on.windowWrites != 0 {
			b.Errorf("the operator wrote %d times in the steady state with polling on", on.windowWrites)
		}
	}
}

type pollFigures struct {
	interval                        time.Duration
	reconciled                      time.Duration
	windowCPU, anon, pollsPerSecond float64
	polls, refused                  int64
	windowWrites                    int
	allPolled                       time.Duration
	settleWrites                    int
	windowAnon                      float64
	settled                         time.Duration
}

func (f pollFigures) String() string {
	return fmt.Sprintf("1,000 Gateways reconciled in %s; %d pods all polled %s after they were ready, their status written in %d writes over %s more; in %s of steady state: operator CPU %.2f s, %d writes, %.1f polls/s, peak anonymous memory %.1f MiB; peak anonymous memory of the whole run %.1f MiB",
		f.reconciled.Round(time.Millisecond), gateways*pollReplicas, f.allPolled.Round(time.Second), f.settleWrites, f.settled.Round(time.Second),
		pollWindow, f.windowCPU, f.windowWrites, f.pollsPerSecond, f.windowAnon, f.anon)
}

func pollRun(b *testing.B, ctx context.Context, bin string, interval time.Duration) pollFigures {
	ctx, cancel := context.WithCancel(ctx)
	c := startCluster(b, 0)
	defer func() {
		cancel()
		_ = c.env.Stop()
	}()
	ps := startPodServer(b)
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		b.Fatal(err)
	}
	op := startOperator(b, ctx, bin, c, "--dependency-poll-interval="+interval.String(), "--operator-namespace="+operatorNamespace)
	f := pollFigures{interval: interval}
	f.reconciled = createPolledGateways(b, ctx, c, ps.port)
	ready := time.Now()
	parallel(b, gateways*pollReplicas, func(i int) error { return readyPod(ctx, c.client, i) })
	if interval > 0 {
		// Every pod polled once: the first round after the pods were ready.
		for ps.reports.Load() < int64(gateways*pollReplicas) {
			if time.Since(ready) > 3*interval+2*time.Minute {
				b.Fatalf("%d of %d pods polled %s after they were ready", ps.reports.Load(), gateways*pollReplicas, time.Since(ready))
			}
			time.Sleep(100 * time.Millisecond)
		}
		f.allPolled = time.Since(ready)
	}
	f.settleWrites, f.settled = settle(b, ctx, c)
	cpu, polls, writes := op.cpuSeconds(), ps.reports.Load(), writeCount(apiserverMetrics(b, ctx, c))
	// The window's own peak: the polls alone, after the first round's status writes.
	profiled := cpuProfile(bin+"-polling-"+interval.String(), "window", pollWindow-5*time.Second)
	for end := time.Now().Add(pollWindow); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if anon := float64(procStatus(op.cmd.Process.Pid, "RssAnon:")) / (1 << 20); anon > f.windowAnon {
			f.windowAnon = anon
		}
	}
	f.windowCPU = op.cpuSeconds() - cpu
	profiled()
	f.polls = ps.reports.Load()
	f.pollsPerSecond = float64(f.polls-polls) / pollWindow.Seconds()
	f.windowWrites = writeCount(apiserverMetrics(b, ctx, c)) - writes
	f.refused = ps.refused.Load()
	heapProfile(bin + "-polling-" + interval.String())
	_, f.anon = op.peaks()
	return f
}

// settle waits until the status patches of the first polls are written: a 5 s slice
// without a write (at most 3 minutes). It returns the writes it waited for and how long.
func settle(b *testing.B, ctx context.Context, c *cluster) (int, time.Duration) {
	start, total := time.Now(), 0
	for time.Since(start) < 3*time.Minute {
		before := writeCount(apiserverMetrics(b, ctx, c))
		time.Sleep(5 * time.Second)
		n := writeCount(apiserverMetrics(b, ctx, c)) - before
		if n == 0 {
			break
		}
		total += n
	}
	return total, time.Since(start)
}

// createPolledGateways creates the Gateways (3 replicas, their port the pod server's)
// and waits until each is reconciled.
func createPolledGateways(b *testing.B, ctx context.Context, c *cluster, port int) time.Duration {
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pollNamespace}}); err != nil {
		b.Fatal(err)
	}
	done := watchReconciled(b, ctx, c, pollNamespace)
	start := time.Now()
	parallel(b, gateways, func(i int) error {
		gw := benchGateway(pollNamespace, i)
		pollShape(port)(gw)
		return c.client.Create(ctx, gw)
	})
	for got := done(); got < gateways; got = done() {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d Gateways reconciled after %s", got, gateways, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// pollShape makes a benchGateway one of the polled Gateways: pollReplicas replicas, on
// port (the loopback server's; 0 leaves the default, which writes the same objects).
func pollShape(port int) func(*ferrofedv1alpha1.Gateway) {
	return func(gw *ferrofedv1alpha1.Gateway) {
		gw.Spec.Replicas = ptr.To[int32](pollReplicas)
		if port != 0 {
			gw.Spec.Port = int32(port)
		}
	}
}

// readyPod makes the i-th pod (replica i%3 of Gateway i/3) as the kubelet would have it:
// the Gateway's labels, running and ready on the loopback address.
func readyPod(ctx context.Context, c client.Client, i int) error {
	gw := &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: pollNamespace, Name: fmt.Sprintf("gw-%04d", i/pollReplicas)}}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pollNamespace, Name: gw.Name + "-" + strconv.Itoa(i%pollReplicas), Labels: controllers.Labels(gw)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: controllers.ContainerName, Image: "ghcr.io/ferrofed/ferrofed:bench"}}},
	}
	if err := c.Create(ctx, p); err != nil {
		return err
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
	return c.Status().Update(ctx, p)
}
