// Package process benchmarks `ferrofed operator` as its own process, the binary users
// run, against envtest, without the test's own clients in the figures:
//   - 1,000 Gateways: the time until all are reconciled and the process's peak
//     resident memory (VmHWM) and anonymous memory;
//   - a few Gateways in an empty cluster against the same in a cluster holding 1 GiB
//     of unrelated ConfigMaps and Deployments: the operator's memory must not grow
//     with what it does not own.
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
	"k8s.io/client-go/rest"
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
	kubeconfig string
}

func startCluster(b *testing.B, etcdQuotaBytes int64) *cluster {
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
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
	return &cluster{env: env, client: c, kubeconfig: kcPath}
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
}

func startOperator(b *testing.B, ctx context.Context, bin string, c *cluster) *operator {
	cmd := exec.CommandContext(ctx, bin, "operator", "--enable-webhook=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=error")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	op := &operator{stop: make(chan struct{}), sampled: make(chan struct{})}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
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

// peaks stops the sampling and returns the peak RSS and anonymous memory in MiB.
func (op *operator) peaks() (float64, float64) {
	close(op.stop)
	<-op.sampled
	return float64(op.peak.Load()) / (1 << 20), float64(op.peakAnon.Load()) / (1 << 20)
}

// createGateways creates n Gateways in namespace with 8 writers and waits until the
// operator reconciled every one.
func createGateways(b *testing.B, ctx context.Context, c client.Client, namespace string, n int) time.Duration {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				gw := &ferrofedv1alpha1.Gateway{
					ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("gw-%04d", i)},
					Spec: ferrofedv1alpha1.GatewaySpec{
						Image:    "ghcr.io/ferrofed/ferrofed:bench",
						Replicas: ptr.To[int32](int32(1 + i%2)),
						Config: &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(fmt.Sprintf(
							"[[registry.members]]\nid = \"node-%d\"\nquery_endpoint = \"https://node-%d.example.org/fhir\"\n", i, i))},
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
		done, err := reconciled(ctx, c, namespace)
		if err != nil {
			b.Fatal(err)
		}
		if done == n {
			return time.Since(start)
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d Gateways reconciled after %s", done, n, time.Since(start))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func benchProcess(b *testing.B, bin string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startCluster(b, 0)
	op := startOperator(b, ctx, bin, c)
	elapsed := createGateways(b, ctx, c.client, "bench", gateways)
	peak, anon := op.peaks()
	b.ReportMetric(elapsed.Seconds(), "s/1000-gateways")
	b.ReportMetric(peak, "MiB-operator-peak-rss")
	b.ReportMetric(anon, "MiB-operator-peak-anon")
	fmt.Printf("bench (ferrofed operator process): %d Gateways reconciled after %s; operator peak RSS %.1f MiB (anonymous %.1f MiB, the rest the binary's mapped pages)\n",
		gateways, elapsed.Round(time.Millisecond), peak, anon)
	if elapsed > 60*time.Second || peak > 150 {
		b.Errorf("over the goal of 60 s and 150 MiB")
	}
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
	createGateways(b, ctx, c.client, "quiet", quietGateways)
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

func reconciled(ctx context.Context, c client.Client, namespace string) (int, error) {
	var gws ferrofedv1alpha1.GatewayList
	if err := c.List(ctx, &gws, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	deps := &metav1.PartialObjectMetadataList{}
	deps.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err := c.List(ctx, deps, client.InNamespace(namespace)); err != nil {
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
