// Package process benchmarks `ferrofed operator` as its own process, the binary users
// run, against envtest: 1,000 Gateways, the time until all are reconciled and the
// process's peak resident memory (VmHWM), without the test's own clients in the figure.
package process_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/test/controlplane"
	"github.com/ferrofed/ferrofed/test/proctest"
)

const gateways = 1000

func BenchmarkOperatorProcess1000Gateways(b *testing.B) {
	controlplane.Require(b, false)
	for i := 0; i < b.N; i++ {
		benchProcess(b)
	}
}

func benchProcess(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "ferrofed")
	// Built as the image builds it (examples/Dockerfile): stripped, so that the figure
	// is the resident memory of the binary users run.
	if err := proctest.BuildFerrofed(bin, "-trimpath", "-ldflags", "-s -w"); err != nil {
		b.Fatal(err)
	}

	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS = -1
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "operator", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		b.Fatal(err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = ferrofedv1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	op := exec.CommandContext(ctx, bin, "operator", "--enable-webhook=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=error")
	op.Env = append(os.Environ(), "KUBECONFIG="+kcPath)
	op.Stderr = os.Stderr
	if err := op.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = op.Wait() }()

	var peak, peakAnon atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss := procStatus(op.Process.Pid, "VmHWM:"); rss > peak.Load() {
				peak.Store(rss)
			}
			if anon := procStatus(op.Process.Pid, "RssAnon:"); anon > peakAnon.Load() {
				peakAnon.Store(anon)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for n := next.Add(1) - 1; n < gateways; n = next.Add(1) - 1 {
				gw := &ferrofedv1alpha1.Gateway{
					ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("gw-%04d", n)},
					Spec: ferrofedv1alpha1.GatewaySpec{
						Image:    "ghcr.io/ferrofed/ferrofed:bench",
						Replicas: ptr.To[int32](int32(1 + n%2)),
						Config: &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(fmt.Sprintf(
							"[[registry.members]]\nid = \"node-%d\"\nquery_endpoint = \"https://node-%d.example.org/fhir\"\n", n, n))},
					},
				}
				if err := c.Create(ctx, gw); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for {
		done, err := reconciled(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		if done == gateways {
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d Gateways reconciled after %s", done, gateways, time.Since(start))
		}
		time.Sleep(250 * time.Millisecond)
	}
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	b.ReportMetric(elapsed.Seconds(), "s/1000-gateways")
	b.ReportMetric(float64(peak.Load())/(1<<20), "MiB-operator-peak-rss")
	b.ReportMetric(float64(peakAnon.Load())/(1<<20), "MiB-operator-peak-anon")
	fmt.Printf("bench (ferrofed operator process): %d Gateways reconciled after %s; operator peak RSS %.1f MiB (anonymous %.1f MiB, the rest the binary's mapped pages)\n",
		gateways, elapsed.Round(time.Millisecond), float64(peak.Load())/(1<<20), float64(peakAnon.Load())/(1<<20))
	if elapsed > 60*time.Second || peak.Load() > 150<<20 {
		b.Errorf("over the goal of 60 s and 150 MiB")
	}
}

func reconciled(ctx context.Context, c client.Client) (int, error) {
	var gws ferrofedv1alpha1.GatewayList
	if err := c.List(ctx, &gws, client.InNamespace("bench")); err != nil {
		return 0, err
	}
	deps := &metav1.PartialObjectMetadataList{}
	deps.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err := c.List(ctx, deps, client.InNamespace("bench")); err != nil {
		return 0, err
	}
	have := map[string]bool{}
	for _, d := range deps.Items {
		have[d.Name] = true
	}
	n := 0
	for _, g := range gws.Items {
		if g.Status.ObservedGeneration == g.Generation && have[g.Name] {
			n++
		}
	}
	return n, nil
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
