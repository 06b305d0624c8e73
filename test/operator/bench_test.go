package operator_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

const benchGateways = 1000

// BenchmarkReconcile1000Gateways creates 1,000 Gateways and measures the time until
// every one is reconciled (status.observedGeneration == generation and its Deployment
// exists), the peak memory of the process running the controller, and the writes per
// Gateway. envtest runs no kube-controller-manager: Deployments never get pods, so
// "reconciled" means derived objects applied and status written. The goal is ≤ 60 s
// and ≤ 150 MiB. The process also holds the test's own clients, so its memory is an
// upper bound of the controller's.
func BenchmarkReconcile1000Gateways(b *testing.B) {
	needControlPlane(b)
	for i := 0; i < b.N; i++ {
		benchOnce(b, fmt.Sprintf("bench-%d", i))
	}
}

func benchOnce(b *testing.B, namespace string) {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var peakHeap atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	w0, e0 := writes.Load(), eventsSent.Load()
	start := time.Now()

	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for n := next.Add(1) - 1; n < benchGateways; n = next.Add(1) - 1 {
				gw := newGateway(namespace, fmt.Sprintf("gw-%04d", n), func(g *ferrofedv1alpha1.Gateway) {
					g.Spec.Replicas = ptr.To[int32](int32(1 + n%2)) // half of them get a PodDisruptionBudget
					g.Spec.Config = withIssuer(fmt.Sprintf(
						"[[registry.members]]\nid = \"node-%d\"\nquery_endpoint = \"https://node-%d.example.org/fhir\"\n", n, n))
				})
				if err := k8s.Create(ctx, gw); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	created := time.Since(start)

	deadline := start.Add(5 * time.Minute)
	for {
		done, err := countReconciled(ctx, namespace)
		if err != nil {
			b.Fatal(err)
		}
		if done == benchGateways {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d Gateways reconciled after %s", done, benchGateways, time.Since(start))
		}
		time.Sleep(250 * time.Millisecond)
	}
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	w, e := writes.Load()-w0, eventsSent.Load()-e0
	rss := peakRSS()

	b.ReportMetric(elapsed.Seconds(), "s/1000-gateways")
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "MiB-peak-heap")
	b.ReportMetric(float64(rss)/(1<<20), "MiB-peak-rss")
	b.ReportMetric(float64(w)/benchGateways, "writes/gateway")
	b.ReportMetric(float64(e)/benchGateways, "events/gateway")
	fmt.Printf("bench: %d Gateways created in %s, all reconciled after %s; peak heap in use %.1f MiB, peak RSS %.1f MiB; %d writes (%.2f per Gateway) and %d events (%.2f per Gateway)\n",
		benchGateways, created.Round(time.Millisecond), elapsed.Round(time.Millisecond),
		float64(peakHeap.Load())/(1<<20), float64(rss)/(1<<20), w, float64(w)/benchGateways, e, float64(e)/benchGateways)
	if elapsed > 60*time.Second {
		b.Errorf("reconciling %d Gateways took %s, over the 60 s goal", benchGateways, elapsed)
	}
	if rss > 150<<20 {
		b.Errorf("peak RSS %.1f MiB, over the 150 MiB goal", float64(rss)/(1<<20))
	}
}

// countReconciled counts the Gateways whose status describes their generation and
// whose Deployment exists, with uncached lists.
func countReconciled(ctx context.Context, namespace string) (int, error) {
	var gws ferrofedv1alpha1.GatewayList
	if err := k8s.List(ctx, &gws, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	deps := &metav1.PartialObjectMetadataList{}
	deps.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err := k8s.List(ctx, deps, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	have := make(map[string]bool, len(deps.Items))
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

// peakRSS is the process's peak resident set size (VmHWM), in bytes.
func peakRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
