// Package process benchmarks `ferrofed operator` as its own process, the binary users
// run, against envtest, without the test's own clients in the figures:
//   - 1,000 Gateways: the time until all are reconciled against the floor (a bare
//     client making the same Gateways and the same owned objects, with server-side
//     apply, on a fresh control plane, before and after the operator's run, the
//     ratio against their mean), the process's peak resident
//     memory (VmHWM) and anonymous memory, the writes it makes once nothing changes,
//     and the webhook's latency under 50 concurrent server-side dry-run creates; the
//     requests the apiserver took from the floor and from the operator, by verb and
//     resource, are printed next to the figures (where the time against the floor goes);
//   - a few Gateways in an empty cluster against the same in a cluster holding 1 GiB
//     of unrelated ConfigMaps and Deployments: the operator's memory must not grow
//     with what it does not own.
package process_test

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math"
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
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/test/controlplane"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/proctest"
)

const gateways = 1000

func BenchmarkOperatorProcess1000Gateways(b *testing.B) {
	controlplane.Require(b, false)
	bin := buildOperator(b)
	for i := 0; i < b.N; i++ {
		benchProcess(b, bin)
	}
}

// buildOperator builds the binary as the image builds it (examples/Dockerfile):
// stripped, so that the figure is the resident memory of the binary users run.
// FERROFED_OPERATOR_BIN names another binary instead (an older build, to compare).
func buildOperator(b *testing.B) string {
	if bin := os.Getenv("FERROFED_OPERATOR_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "ferrofed")
	if err := proctest.BuildFerrofed(bin, "-trimpath", "-ldflags", "-s -w"); err != nil {
		b.Fatal(err)
	}
	return bin
}

// cluster is an envtest control plane with the Gateway CRD, a client of it, and a
// kubeconfig for the operator process.
type cluster struct {
	env        *envtest.Environment
	client     client.Client
	rest       *rest.Config
	kubeconfig string
}

func startCluster(b *testing.B, etcdQuotaBytes int64) *cluster {
	return startClusterWith(b, etcdQuotaBytes, false)
}

// startClusterWith starts the cluster, with the operator's webhook configuration
// (config/webhook, pointed by envtest at a local port and certificate) when webhook.
func startClusterWith(b *testing.B, etcdQuotaBytes int64, webhook bool) *cluster {
	log.SetLogger(logr.Discard()) // envtest's own logs; the operator logs to its stderr
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	if webhook {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "..", "config", "webhook")}}
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	if etcdQuotaBytes > 0 {
		env.ControlPlane.Etcd = &envtest.Etcd{}
		env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.FormatInt(etcdQuotaBytes, 10))
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	cfg.QPS = -1
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "operator", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		b.Fatal(err)
	}
	kcPath := filepath.Join(b.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	c, err := client.New(rest.CopyConfig(cfg), client.Options{Scheme: newScheme()})
	if err != nil {
		b.Fatal(err)
	}
	return &cluster{env: env, client: c, rest: rest.CopyConfig(cfg), kubeconfig: kcPath}
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = ferrofedv1alpha1.AddToScheme(scheme)
	return scheme
}

// operator is a running `ferrofed operator` whose peak memory is sampled every 100 ms.
type operator struct {
	peak, peakAnon atomic.Uint64
	stop           chan struct{}
	sampled        chan struct{}
	// metrics is the address of its plain-http metrics endpoint, when the binary has
	// --metrics-insecure (older builds: empty).
	metrics string
	cmd     *exec.Cmd
}

// end kills the process and waits for it.
func (op *operator) end() {
	_ = op.cmd.Process.Kill()
	_ = op.cmd.Wait()
}

// metricsPort is where the operator under benchmark serves its metrics.
const metricsPort = "127.0.0.1:18443"

// hasFlag reports whether bin's operator command knows flag.
func hasFlag(bin, flag string) bool {
	out, _ := exec.Command(bin, "operator", "--help").CombinedOutput()
	return strings.Contains(string(out), flag)
}

func startOperator(b *testing.B, ctx context.Context, bin string, c *cluster, extra ...string) *operator {
	args := []string{"operator", "--enable-webhook=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=error"}
	if addr := os.Getenv("FERROFED_BENCH_PPROF"); addr != "" {
		args = append(args, "--pprof-bind-address="+addr) // see heapProfile
	}
	metrics := ""
	if hasFlag(bin, "--metrics-insecure") {
		metrics = metricsPort
		args = append(args, "--metrics-bind-address="+metrics, "--metrics-insecure")
	}
	if wh := c.env.WebhookInstallOptions; len(wh.ValidatingWebhooks) > 0 {
		args = append(args, "--enable-webhook=true", "--webhook-port="+strconv.Itoa(wh.LocalServingPort), "--webhook-cert-dir="+wh.LocalServingCertDir)
	}
	args = append(args, extra...)
	// FERROFED_OPERATOR_ARGS: more flags for the operator (e.g.
	// --max-concurrent-reconciles=4), space-separated, after the benchmark's own.
	args = append(args, strings.Fields(os.Getenv("FERROFED_OPERATOR_ARGS"))...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig)
	// FERROFED_OPERATOR_ENV: more variables for the operator only (GODEBUG=gctrace=1,
	// GOGC=...), space-separated.
	cmd.Env = append(cmd.Env, strings.Fields(os.Getenv("FERROFED_OPERATOR_ENV"))...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	op := &operator{stop: make(chan struct{}), sampled: make(chan struct{}), metrics: metrics, cmd: cmd}
	var ended sync.Once
	b.Cleanup(func() { ended.Do(op.end) })
	if wh := c.env.WebhookInstallOptions; len(wh.ValidatingWebhooks) > 0 {
		// The apiserver refuses every Gateway until the webhook serves: wait for it
		// before the clock starts (a loaded machine starts the operator slowly).
		addr := net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort))
		for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
			if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				conn.Close()
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("the operator's webhook does not serve on %s after a minute", addr)
			}
		}
	}
	go func() {
		defer close(op.sampled)
		for {
			if rss := procStatus(cmd.Process.Pid, "VmHWM:"); rss > op.peak.Load() {
				op.peak.Store(rss)
			}
			if anon := procStatus(cmd.Process.Pid, "RssAnon:"); anon > op.peakAnon.Load() {
				op.peakAnon.Store(anon)
			}
			select {
			case <-op.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return op
}

// cpuSeconds is the CPU time the process has used so far (user and system).
func (op *operator) cpuSeconds() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", op.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// After the command's name in parentheses: state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(data), ')')
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// peaks stops the sampling and returns the peak RSS and anonymous memory in MiB.
func (op *operator) peaks() (float64, float64) {
	close(op.stop)
	<-op.sampled
	return float64(op.peak.Load()) / (1 << 20), float64(op.peakAnon.Load()) / (1 << 20)
}

// createGateways creates n Gateways in namespace with 8 writers and waits until the
// operator reconciled every one.
func createGateways(b *testing.B, ctx context.Context, c *cluster, namespace string, n int) time.Duration {
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		b.Fatal(err)
	}
	done := watchReconciled(b, ctx, c, namespace)
	start := time.Now()
	parallel(b, n, func(i int) error { return c.client.Create(ctx, benchGateway(namespace, i)) })
	for {
		if got := done(); got == n {
			return time.Since(start)
		} else if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d Gateways reconciled after %s", got, n, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchGateway is the i-th Gateway of a benchmark: one or two replicas, one member, and
// the issuer its data plane's tokens are verified with (issuer.RemoteTable).
func benchGateway(namespace string, i int) *ferrofedv1alpha1.Gateway {
	return &ferrofedv1alpha1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("gw-%04d", i)},
		Spec: ferrofedv1alpha1.GatewaySpec{
			Image:    "ghcr.io/ferrofed/ferrofed:bench",
			Replicas: ptr.To[int32](int32(1 + i%2)),
			Config: &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(issuer.WithRemote(fmt.Sprintf(
				"[[registry.members]]\nid = \"node-%d\"\nquery_endpoint = \"https://node-%d.example.org/fhir\"\n", i, i)))},
		},
	}
}

// parallel runs f(0..n-1) on 8 writers, as a busy cluster's clients would; the first
// error fails the benchmark.
func parallel(b *testing.B, n int, f func(i int) error) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// floor is how fast this control plane takes the writes the operator makes for n
// Gateways, from a bare client with no cache, no watch and no decision to make: each
// Gateway created, its page-token Secret created, its ConfigMap, Deployment, Service
// and (with two replicas) PodDisruptionBudget applied server-side from the operator's
// own builders, and its status patched once. The operator's Events are left out: they
// are its choice, not the floor.
func floor(b *testing.B, ctx context.Context, n int, shape ...func(*ferrofedv1alpha1.Gateway)) (time.Duration, mix) {
	c := startCluster(b, 0)
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "floor"}}); err != nil {
		b.Fatal(err)
	}
	before := requestCounts(apiserverMetrics(b, ctx, c))
	profiled := apiserverProfile(b, ctx, c, "floor", 15*time.Second)
	start := time.Now()
	parallel(b, n, func(i int) error {
		gw := benchGateway("floor", i)
		for _, f := range shape {
			f(gw)
		}
		if err := c.client.Create(ctx, gw); err != nil {
			return err
		}
		plan := gatewayspec.Plan(&gw.Spec)
		rendered, err := gatewayspec.RenderAndCheck(&gw.Spec, plan, []byte(*gw.Spec.Config.Inline))
		if err != nil {
			return err
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		if err := c.client.Create(ctx, controllers.PageTokenSecret(gw, key)); err != nil {
			return err
		}
		owned := []runtime.ApplyConfiguration{controllers.ConfigMap(gw, rendered, ""), controllers.Deployment(gw, plan, rendered), controllers.Service(gw, rendered)}
		if pdb := controllers.PodDisruptionBudget(gw); pdb != nil {
			owned = append(owned, pdb)
		}
		for _, o := range owned {
			if err := c.client.Apply(ctx, o, client.FieldOwner(controllers.FieldOwner), client.ForceOwnership); err != nil {
				return err
			}
		}
		patch := client.MergeFrom(gw.DeepCopy())
		gw.Status.ObservedGeneration = gw.Generation
		gw.Status.TerminationGracePeriodSeconds = plan.GracePeriodSeconds
		return c.client.Status().Patch(ctx, gw, patch)
	})
	took := time.Since(start)
	profiled()
	m := mixSince(b, ctx, c, before)
	_ = c.env.Stop() // its control plane takes no CPU from the operator's run
	return took, m
}

// mix is what the apiserver took in a phase: the requests by verb and resource, and
// the writes among them.
type mix struct {
	breakdown string
	writes    int
}

func mixSince(b *testing.B, ctx context.Context, c *cluster, before map[string]int) mix {
	breakdown, writes := requestMix(before, requestCounts(apiserverMetrics(b, ctx, c)))
	return mix{breakdown, writes}
}

// figures are what one operator binary did with the 1,000 Gateways.
type figures struct {
	elapsed    time.Duration
	peak, anon float64
	// cpu is the operator's CPU seconds until every Gateway was reconciled.
	cpu    float64
	writes int
	mix    mix
	hook   hookFigures
}

// runOperator runs bin on a fresh control plane with its webhook: the 1,000 Gateways,
// the idle writes, then the 50 concurrent dry-run creates.
func runOperator(b *testing.B, ctx context.Context, bin string) figures {
	ctx, cancel := context.WithCancel(ctx)
	c := startClusterWith(b, 0, true)
	defer func() {
		cancel()         // the operator's process ends with this run,
		_ = c.env.Stop() // and so does its control plane, before the next run
	}()
	before := requestCounts(apiserverMetrics(b, ctx, c))
	op := startOperator(b, ctx, bin, c)
	var f figures
	profiled := cpuProfile(bin, "reconciles", 15*time.Second)
	apiserverProfiled := apiserverProfile(b, ctx, c, "operator", 15*time.Second)
	f.elapsed = createGateways(b, ctx, c, "bench", gateways)
	f.cpu = op.cpuSeconds()
	profiled()
	apiserverProfiled()
	f.mix = mixSince(b, ctx, c, before)
	f.writes = writesWhileIdle(b, ctx, c, 10*time.Second)
	heapProfile(bin)
	f.hook = webhookLatency(b, ctx, c, op, bin)
	f.peak, f.anon = op.peaks()
	return f
}

// heapProfile saves the operator's heap profile at steady state, when
// FERROFED_BENCH_PPROF names the address its pprof endpoint listens on, into
// FERROFED_BENCH_PPROF_DIR (default the temporary directory), named after the binary.
func heapProfile(bin string) {
	if addr := os.Getenv("FERROFED_BENCH_PPROF"); addr != "" {
		saveProfile(filepath.Base(bin), "steady-state", "heap", fromPprof(addr, "heap?gc=1"))()
	}
}

func (f figures) String() string {
	return fmt.Sprintf("%d Gateways reconciled after %s (operator CPU %.1f s); peak RSS %.1f MiB (anonymous %.1f MiB, the rest the binary's mapped pages); %d writes in 10 s with nothing changed; %d concurrent dry-run creates: p99 %s end to end, the apiserver's webhook calls: p99 %s (%.1f %% under 5 ms, %d calls), the webhook server's own: p99 %s (%s, %d requests; %d GC cycles, %.1f KiB allocated per review)",
		gateways, f.elapsed.Round(time.Millisecond), f.cpu, f.peak, f.anon, f.writes,
		dryRunClients, f.hook.p99.Round(10*time.Microsecond), f.hook.webhookP99, 100*f.hook.webhookUnder5ms, f.hook.webhookCalls,
		f.hook.serverP99, f.hook.serverUnder5msText(), f.hook.serverRequests, f.hook.gcCycles, f.hook.allocated/1024/float64(max(1, f.hook.serverRequests)))
}

func (h hookFigures) serverUnder5msText() string {
	if h.serverUnder5ms < 0 {
		return "its buckets cannot tell 5 ms"
	}
	return fmt.Sprintf("%.1f %% under 5 ms", 100*h.serverUnder5ms)
}

func benchProcess(b *testing.B, bin string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The floor is measured before and after the operator runs, and the time is
	// compared with their mean: a shared machine's speed drifts within a run (floors of
	// 19 s and 30 s in two runs of one hour), and one floor measured only before would
	// carry that drift into the ratio.
	floorBefore, floorMix := floor(b, ctx, gateways)
	// FERROFED_OPERATOR_BASELINE_BIN: another build (e.g. of an older commit) run
	// between the same floors, for before/after figures; before the binary under test,
	// or after it with FERROFED_OPERATOR_BASELINE_LAST=1 (the second run of a shared
	// machine is often the slower).
	var base *figures
	baseline := func() {
		if bin := os.Getenv("FERROFED_OPERATOR_BASELINE_BIN"); bin != "" {
			f := runOperator(b, ctx, bin)
			base = &f
		}
	}
	last := os.Getenv("FERROFED_OPERATOR_BASELINE_LAST") == "1"
	if !last {
		baseline()
	}
	f := runOperator(b, ctx, bin)
	if last {
		baseline()
	}
	floorAfter, _ := floor(b, ctx, gateways)
	floorTook := (floorBefore + floorAfter) / 2
	// How far the machine's speed moved during the run: a mean of two floors that far
	// apart stands for neither end of the operator's run.
	drift := math.Abs(floorAfter.Seconds()-floorBefore.Seconds()) / floorTook.Seconds()
	fmt.Printf("bench (floor): %s before the operator, %s after, %s their mean (%.0f %% apart)\n",
		floorBefore.Round(time.Millisecond), floorAfter.Round(time.Millisecond), floorTook.Round(time.Millisecond), 100*drift)
	if drift > 0.15 {
		fmt.Printf("bench (floor): the machine's speed changed by more than 15 %% during this run: its ratios are not comparable with a steadier run's\n")
	}
	b.ReportMetric(drift, "floor-drift")
	if base != nil {
		fmt.Printf("bench (baseline %s): %s; %.2f× the floor\n", os.Getenv("FERROFED_OPERATOR_BASELINE_BIN"), *base, base.elapsed.Seconds()/floorTook.Seconds())
	}
	elapsed, peak, anon, writes, opMix, hook := f.elapsed, f.peak, f.anon, f.writes, f.mix, f.hook
	b.ReportMetric(elapsed.Seconds(), "s/1000-gateways")
	b.ReportMetric(f.cpu, "s-operator-cpu")
	b.ReportMetric(floorTook.Seconds(), "s-floor")
	b.ReportMetric(elapsed.Seconds()/floorTook.Seconds(), "time/floor")
	b.ReportMetric(peak, "MiB-operator-peak-rss")
	b.ReportMetric(anon, "MiB-operator-peak-anon")
	b.ReportMetric(float64(writes), "writes-when-unchanged")
	b.ReportMetric(float64(floorMix.writes)/gateways, "writes/gateway-floor")
	b.ReportMetric(float64(opMix.writes)/gateways, "writes/gateway-operator")
	b.ReportMetric(float64(hook.p99.Microseconds())/1000, "ms-dry-run-create-p99")
	b.ReportMetric(hook.webhookP99Bound.Seconds()*1000, "ms-webhook-p99-at-most")
	b.ReportMetric(hook.webhookUnder5ms, "webhook-calls-under-5ms")
	if hook.serverUnder5ms >= 0 {
		b.ReportMetric(hook.serverUnder5ms, "webhook-own-under-5ms")
	}
	fmt.Printf("bench (ferrofed operator process): %s; the floor %s (%.2f×)\n", f, floorTook.Round(time.Millisecond), elapsed.Seconds()/floorTook.Seconds())
	// What the apiserver took, the benchmark's own Gateway creates and (with the
	// operator) its two watches included: where the time against the floor goes.
	fmt.Printf("bench (apiserver requests): floor: %s\nbench (apiserver requests): operator: %s\n", floorMix.breakdown, opMix.breakdown)
	// The time is a figure against the floor of the same run, not checked against a
	// number of seconds a shared machine cannot promise.
	if peak > 150 {
		b.Errorf("a peak RSS of %.1f MiB, over the goal of 150 MiB", peak)
	}
	if writes != 0 {
		b.Errorf("the operator wrote %d times while nothing changed", writes)
	}
}

// apiserverProfile records the apiserver's CPU profile for d (its /debug/pprof) when
// FERROFED_BENCH_APISERVER_PPROF is set, into FERROFED_BENCH_PPROF_DIR: where the
// apiserver's time goes in the floor and in the operator's run. It returns a function
// that waits for it.
func apiserverProfile(b *testing.B, ctx context.Context, c *cluster, what string, d time.Duration) func() {
	if os.Getenv("FERROFED_BENCH_APISERVER_PPROF") == "" {
		return func() {}
	}
	cs, err := kubernetes.NewForConfig(c.rest)
	if err != nil {
		b.Fatal(err)
	}
	return saveProfile("kube-apiserver", what, "cpu", func() ([]byte, error) {
		return cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(int(d.Seconds()))).
			Timeout(d + 30*time.Second).DoRaw(ctx)
	})
}

// apiserverMetrics reads the apiserver's own /metrics.
func apiserverMetrics(b *testing.B, ctx context.Context, c *cluster) string {
	cs, err := kubernetes.NewForConfig(c.rest)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return string(raw)
}

// writeCount sums apiserver_request_total over the verbs that write, leaving out
// dry runs and the requests no reconcile makes (leases, reviews).
func writeCount(metrics string) int {
	n := 0
	for key, v := range requestCounts(metrics) {
		switch strings.Fields(key)[0] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			n += v
		}
	}
	return n
}

// requestCounts sums apiserver_request_total by "VERB resource[/subresource]", leaving
// out dry runs and the requests no reconcile makes (leases, reviews).
func requestCounts(metrics string) map[string]int {
	counts := map[string]int{}
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(rest[:end], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		if labels["dry_run"] == "All" || labels["resource"] == "leases" || strings.HasSuffix(labels["resource"], "reviews") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		counts[key] += int(v)
	}
	return counts
}

// requestMix is what the apiserver took between two readings of its metrics, by verb
// and resource, for the figures' breakdown, and the total of the writes among them.
func requestMix(before, after map[string]int) (string, int) {
	var keys []string
	writes := 0
	for k, v := range after {
		if v-before[k] > 0 {
			keys = append(keys, k)
			switch strings.Fields(k)[0] {
			case "POST", "PUT", "PATCH", "DELETE", "APPLY":
				writes += v - before[k]
			}
		}
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, after[k]-before[k]))
	}
	return strings.Join(parts, ", "), writes
}

// writesWhileIdle counts the writes the apiserver takes during quiet, once every
// Gateway is reconciled and nothing changes: the operator's alone, since the benchmark
// writes nothing then.
func writesWhileIdle(b *testing.B, ctx context.Context, c *cluster, quiet time.Duration) int {
	time.Sleep(2 * time.Second) // the last status patches' watch events arrive
	before := writeCount(apiserverMetrics(b, ctx, c))
	time.Sleep(quiet)
	return writeCount(apiserverMetrics(b, ctx, c)) - before
}

const (
	dryRunClients = 50
	dryRunEach    = 20
)

type hookFigures struct {
	p99             time.Duration
	webhookCalls    int
	webhookUnder5ms float64
	// webhookP99 is the p99 of the apiserver's webhook calls from its histogram's
	// bucket deltas, as the bucket it falls in ("≤ 5ms", "(5ms, 25ms]");
	// webhookP99Bound is that bucket's upper bound.
	webhookP99      string
	webhookP99Bound time.Duration
	// serverP99 is the same from the webhook's own histogram (serverBuckets): the
	// handler's time in the operator, TLS and the apiserver's side left out; "n/a" when
	// the binary cannot serve its metrics in plain http. serverUnder5ms is the share of
	// reviews it answered within 5 ms, when its buckets tell (-1 otherwise).
	serverP99      string
	serverRequests int
	serverUnder5ms float64
	// gcCycles and allocated are the operator's garbage collections and allocated
	// bytes during the dry-run creates (its Go runtime's metrics): a review that
	// meets a collection assists its marking.
	gcCycles  int
	allocated float64
}

// describeBucket says where a quantile fell: "≤ 5ms", "in (5ms, 25ms]", "> 10s".
func describeBucket(lo, hi float64) string {
	d := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	switch {
	case math.IsInf(hi, 1):
		return fmt.Sprintf("> %s", d(lo))
	case lo == 0:
		return fmt.Sprintf("≤ %s", d(hi))
	}
	return fmt.Sprintf("in (%s, %s]", d(lo), d(hi))
}

// histogramBuckets reads the cumulative buckets of the histogram name from a
// Prometheus text exposition, for the series whose labels contain every one of match,
// summed over their other labels: count by upper bound (+Inf as math.Inf).
func histogramBuckets(metrics, name string, match ...string) map[float64]float64 {
	out := map[float64]float64{}
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, name+"_bucket{")
		if !ok {
			continue
		}
		all := true
		for _, m := range match {
			all = all && strings.Contains(rest, m)
		}
		if !all {
			continue
		}
		_, le, ok := strings.Cut(rest, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses to +Inf
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		out[bound] += v
	}
	return out
}

// metricValue is the value of an unlabelled sample in a /metrics text (0 without it).
func metricValue(metrics, name string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// operatorMetrics reads the operator's own /metrics ("" when it serves none).
func operatorMetrics(b *testing.B, op *operator) string {
	if op.metrics == "" {
		return ""
	}
	resp, err := http.Get("http://" + op.metrics + "/metrics")
	if err != nil {
		b.Logf("operator metrics: %v", err)
		return ""
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// cpuProfile records the operator's CPU profile for d when FERROFED_BENCH_PPROF is
// set (its pprof address); it returns a function that waits for it.
func cpuProfile(bin, what string, d time.Duration) func() {
	addr := os.Getenv("FERROFED_BENCH_PPROF")
	if addr == "" {
		return func() {}
	}
	return saveProfile(filepath.Base(bin), what, "cpu", fromPprof(addr, fmt.Sprintf("profile?seconds=%d", int(d.Seconds()))))
}

// fromPprof reads a profile from the operator's pprof endpoint at addr.
func fromPprof(addr, profile string) func() ([]byte, error) {
	return func() ([]byte, error) {
		resp, err := http.Get("http://" + addr + "/debug/pprof/" + profile)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
}

// saveProfile runs fetch, which records a profile of process, in the background, and
// writes the profile into FERROFED_BENCH_PPROF_DIR (default the temporary directory),
// named after process, what and the time, with the extension ext; it returns a
// function that waits for it.
func saveProfile(process, what, ext string, fetch func() ([]byte, error)) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		out := filepath.Join(cmp.Or(os.Getenv("FERROFED_BENCH_PPROF_DIR"), os.TempDir()), process+"-"+what+"-"+time.Now().Format("150405")+"."+ext)
		data, err := fetch()
		if err == nil {
			err = os.WriteFile(out, data, 0o644)
		}
		fmt.Printf("bench: %s profile of %s (%s): %s (%v)\n", ext, process, what, out, err)
	}()
	return func() { <-done }
}

// webhookBuckets reads the apiserver's apiserver_admission_webhook_admission_duration_seconds
// histogram of the operator's validating webhook.
func webhookBuckets(metrics string) map[float64]float64 {
	return histogramBuckets(metrics, "apiserver_admission_webhook_admission_duration_seconds", `name="vgateway.ferrofed.io"`, `type="validating"`)
}

// serverBuckets reads the webhook's own latency: the operator's
// ferrofed_operator_webhook_duration_seconds (buckets down to 0.5 ms, 5 ms among them),
// or, from a build that has none (a baseline), controller-runtime's
// controller_runtime_webhook_latency_seconds (a bucket per power of ten).
func serverBuckets(metrics string) map[float64]float64 {
	if own := histogramBuckets(metrics, "ferrofed_operator_webhook_duration_seconds"); len(own) > 0 {
		return own
	}
	return histogramBuckets(metrics, "controller_runtime_webhook_latency_seconds", `webhook="/validate-ferrofed-io-v1alpha1-gateway"`)
}

// quantileBucket is the bucket of the q quantile of the observations between two
// readings of a cumulative histogram: its lower and upper bound.
func quantileBucket(before, after map[float64]float64, q float64) (lo, hi float64, n float64) {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return 0, 0, 0
	}
	n = after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	for _, b := range bounds {
		if after[b]-before[b] >= q*n {
			return lo, b, n
		}
		lo = b
	}
	return lo, bounds[len(bounds)-1], n
}

// webhookLatency sends dryRunClients × dryRunEach server-side dry-run creates of new
// Gateways at once, each through the operator's webhook, and returns their p99 end to
// end and, from the apiserver's apiserver_admission_webhook_admission_duration_seconds
// histogram (buckets 5 ms, 25 ms, 100 ms, ...), the bucket of the webhook calls' p99
// and the share under 5 ms: the webhook's latency as the apiserver sees it, its
// connection and TLS included, without the apiserver's own work on the request.
func webhookLatency(b *testing.B, ctx context.Context, c *cluster, op *operator, bin string) hookFigures {
	h0 := webhookBuckets(apiserverMetrics(b, ctx, c))
	m0 := operatorMetrics(b, op)
	s0 := serverBuckets(m0)
	profiled := cpuProfile(bin, "dry-run-creates", 5*time.Second)
	lat := make([][]time.Duration, dryRunClients)
	var wg sync.WaitGroup
	for w := range dryRunClients {
		wg.Go(func() {
			for i := range dryRunEach {
				gw := benchGateway("bench", 10000+w*dryRunEach+i)
				t0 := time.Now()
				if err := c.client.Create(ctx, gw, client.DryRunAll); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	h1 := webhookBuckets(apiserverMetrics(b, ctx, c))
	m1 := operatorMetrics(b, op)
	s1 := serverBuckets(m1)
	profiled()
	lo, hi, n := quantileBucket(h0, h1, 0.99)
	f := hookFigures{webhookCalls: int(n), webhookP99Bound: time.Duration(hi * float64(time.Second)), webhookP99: describeBucket(lo, hi), serverP99: "n/a", serverUnder5ms: -1}
	if slo, shi, sn := quantileBucket(s0, s1, 0.99); sn > 0 {
		f.serverP99, f.serverRequests = describeBucket(slo, shi), int(sn)
		if _, fine := s1[0.005]; fine {
			f.serverUnder5ms = (s1[0.005] - s0[0.005]) / sn
		}
	}
	if len(all) > 0 {
		f.p99 = all[len(all)*99/100]
	}
	f.gcCycles = int(metricValue(m1, "go_gc_duration_seconds_count") - metricValue(m0, "go_gc_duration_seconds_count"))
	f.allocated = metricValue(m1, "go_memstats_alloc_bytes_total") - metricValue(m0, "go_memstats_alloc_bytes_total")
	if n > 0 {
		f.webhookUnder5ms = (h1[0.005] - h0[0.005]) / n
	}
	if f.webhookCalls < dryRunClients*dryRunEach {
		b.Errorf("the apiserver called the webhook %d times for %d dry-run creates", f.webhookCalls, dryRunClients*dryRunEach)
	}
	return f
}

// unrelatedBytes is what the unrelated objects hold: 3/4 in ConfigMaps of ~1 MiB,
// 1/4 in Deployments with ~240 KiB annotations (under the 256 KiB annotation limit).
const (
	unrelatedBytes    = 1 << 30
	configMapPayload  = 1000 * 1024
	deploymentPayload = 240 * 1024
	quietGateways     = 20
)

// BenchmarkOperatorMemoryWithUnrelatedObjects runs the operator with 20 Gateways in an
// empty cluster, then in a cluster holding 1 GiB of ConfigMaps and Deployments it does
// not own (created before it starts, so its first list sees them all), and reports both
// peaks and their ratio (goal: within 10 %).
func BenchmarkOperatorMemoryWithUnrelatedObjects(b *testing.B) {
	controlplane.Require(b, false)
	bin := buildOperator(b)
	for i := 0; i < b.N; i++ {
		empty := quietRun(b, bin, false)
		busy := quietRun(b, bin, true)
		b.ReportMetric(empty, "MiB-peak-rss-empty-cluster")
		b.ReportMetric(busy, "MiB-peak-rss-1GiB-unrelated")
		b.ReportMetric(busy/empty, "ratio")
		fmt.Printf("bench (operator memory): peak RSS %.1f MiB in an empty cluster, %.1f MiB with 1 GiB of unrelated ConfigMaps and Deployments: %.3f×\n",
			empty, busy, busy/empty)
		if busy > 1.10*empty {
			b.Errorf("the operator's memory grew with objects it does not own: %.1f MiB against %.1f MiB", busy, empty)
		}
	}
}

func quietRun(b *testing.B, bin string, unrelated bool) float64 {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startCluster(b, 8<<30)
	if unrelated {
		fillUnrelated(b, ctx, c.client)
	}
	op := startOperator(b, ctx, bin, c)
	createGateways(b, ctx, c, "quiet", quietGateways)
	time.Sleep(5 * time.Second) // resyncs and watch events settle into the peak
	peak, _ := op.peaks()
	return peak
}

// fillUnrelated writes unrelatedBytes of ConfigMaps and Deployments no Gateway owns or
// references, in a namespace of their own.
func fillUnrelated(b *testing.B, ctx context.Context, c client.Client) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}); err != nil {
		b.Fatal(err)
	}
	cms := (unrelatedBytes * 3 / 4) / configMapPayload
	deps := (unrelatedBytes / 4) / deploymentPayload
	cmData := strings.Repeat("c", configMapPayload)
	depData := strings.Repeat("d", deploymentPayload)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 4 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < cms+deps; i = int(next.Add(1) - 1) {
				var obj client.Object
				if i < cms {
					obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: fmt.Sprintf("cm-%04d", i)},
						Data: map[string]string{"blob": cmData}}
				} else {
					labels := map[string]string{"app": fmt.Sprintf("app-%d", i)}
					obj = &appsv1.Deployment{
						ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: fmt.Sprintf("dep-%04d", i),
							Annotations: map[string]string{"example.org/blob": depData}},
						Spec: appsv1.DeploymentSpec{
							Selector: &metav1.LabelSelector{MatchLabels: labels},
							Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
								Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.org/app"}}}},
						},
					}
				}
				if err := c.Create(ctx, obj); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// watchReconciled watches the Gateways and the Deployments (their metadata) of
// namespace, from before its first Gateway, and returns how many Gateways are
// reconciled so far: status at their generation, and a Deployment of their name. The
// benchmark's own view costs the apiserver one event per change: polling lists of every
// Gateway and Deployment (as this benchmark did before) took it 37 lists of 1,000
// objects each in a 30 s run, CPU the floor never had to share.
func watchReconciled(b *testing.B, ctx context.Context, c *cluster, namespace string) func() int {
	wc, err := client.NewWithWatch(rest.CopyConfig(c.rest), client.Options{Scheme: newScheme()})
	if err != nil {
		b.Fatal(err)
	}
	gws, err := wc.Watch(ctx, &ferrofedv1alpha1.GatewayList{}, client.InNamespace(namespace))
	if err != nil {
		b.Fatal(err)
	}
	depList := &metav1.PartialObjectMetadataList{}
	depList.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	deps, err := wc.Watch(ctx, depList, client.InNamespace(namespace))
	if err != nil {
		gws.Stop()
		b.Fatal(err)
	}
	b.Cleanup(func() { gws.Stop(); deps.Stop() })
	var mu sync.Mutex
	atGeneration, deployed := map[string]bool{}, map[string]bool{}
	follow := func(w watch.Interface, what string, seen func(obj runtime.Object, deleted bool)) {
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if ctx.Err() != nil {
						return // the run ended
					}
					b.Errorf("the watch of %s failed: %v", what, apierrors.FromObject(ev.Object))
					return
				}
				mu.Lock()
				seen(ev.Object, ev.Type == watch.Deleted)
				mu.Unlock()
			}
		}()
	}
	follow(gws, "Gateways", func(obj runtime.Object, deleted bool) {
		if g, ok := obj.(*ferrofedv1alpha1.Gateway); ok {
			atGeneration[g.Name] = !deleted && g.Status.ObservedGeneration == g.Generation
		}
	})
	follow(deps, "Deployments", func(obj runtime.Object, deleted bool) {
		if d, ok := obj.(*metav1.PartialObjectMetadata); ok {
			deployed[d.Name] = !deleted
		}
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for name, ok := range atGeneration {
			if ok && deployed[name] {
				n++
			}
		}
		return n
	}
}

// procStatus reads a kB field of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) uint64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
