//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

var gatewayGVR = schema.GroupVersionResource{Group: "ferrofed.io", Version: "v1alpha1", Resource: "gateways"}

// eventually polls check every interval until it reports done, failing the test with
// the last detail after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	detail := ""
	for {
		done, d, err := check(ctx)
		if err != nil {
			d = err.Error()
		}
		if done {
			return
		}
		if d != detail && d != "" {
			t.Logf("  waiting for %s: %s", what, d)
			detail = d
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not done after %s: %s", what, timeout, detail)
		case <-time.After(time.Second):
		}
	}
}

// ---------------------------------------------------------------------------- Gateways

func gatewayObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ferrofed.io/v1alpha1",
		"kind":       "Gateway",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
}

func (c *cluster) createGateway(ctx context.Context, gw *unstructured.Unstructured) error {
	_, err := c.dyn.Resource(gatewayGVR).Namespace(gw.GetNamespace()).Create(ctx, gw, metav1.CreateOptions{})
	return err
}

// patchGateway merge-patches a Gateway's spec.
func (c *cluster) patchGateway(ctx context.Context, ns, name string, spec map[string]any) error {
	body, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(gatewayGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

func (c *cluster) getGateway(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return c.dyn.Resource(gatewayGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// ownedDeployment is the Deployment whose controller owner is the Gateway.
func (c *cluster) ownedDeployment(ctx context.Context, gw *unstructured.Unstructured) (*appsv1.Deployment, error) {
	list, err := c.kube.AppsV1().Deployments(gw.GetNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == gw.GetUID() {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no Deployment owned by Gateway %s yet", gw.GetName())
}

// ownedService is the Service whose controller owner is the Gateway.
func (c *cluster) ownedService(ctx context.Context, gw *unstructured.Unstructured) (*corev1.Service, error) {
	list, err := c.kube.CoreV1().Services(gw.GetNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == gw.GetUID() {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no Service owned by Gateway %s yet", gw.GetName())
}

// rolledOut reports whether a Deployment finished its rollout: every replica updated and
// available, no old replica counted, and the controller saw the latest generation.
func rolledOut(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	detail := fmt.Sprintf("generation %d/%d, replicas %d, updated %d, ready %d, available %d (want %d)",
		s.ObservedGeneration, d.Generation, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, want)
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want &&
		s.AvailableReplicas == want && s.ReadyReplicas == want, detail
}

// ---------------------------------------------------------------------------- members

// member is one FHIR member test server running as a Deployment with a Service.
type member struct {
	id    string
	delay time.Duration
	url   string // http://<ClusterIP>:8080/fhir once deployed
}

func (c *cluster) deployMember(ctx context.Context, ns string, m *member) error {
	labels := map[string]string{"app.kubernetes.io/name": "fhir-member", "ferrofed.io/member": m.id}
	args := []string{"-listen", "0.0.0.0:8080", "-id", m.id}
	if m.delay > 0 {
		args = append(args, "-delay", m.delay.String())
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "member-" + m.id, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					Containers: []corev1.Container{{
						Name: "member", Image: cfg.memberImage, ImagePullPolicy: corev1.PullNever,
						Args:  args,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
	if _, err := c.kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create member %s: %w", m.id, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "member-" + m.id, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}},
		},
	}
	created, err := c.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = c.kube.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create member Service %s: %w", m.id, err)
	}
	// No cluster DNS is assumed: the gateway reaches members by ClusterIP.
	m.url = fmt.Sprintf("http://%s:8080/fhir", created.Spec.ClusterIP)
	return nil
}

// ---------------------------------------------------------------------------- namespaces

func (c *cluster) freshNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := c.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err == nil {
		t.Logf("deleting namespace %s left from an earlier run", ns)
	}
	eventually(t, 3*time.Minute, "namespace "+ns+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still terminating", nil
	})
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
}

// ---------------------------------------------------------------------------- pod recorder

type deletion struct {
	at    time.Time
	grace int64
}

// podEnd is how one gateway pod ended.
type podEnd struct {
	name       string
	grace      int64         // the pod's terminationGracePeriodSeconds at deletion
	took       time.Duration // from the deletion (SIGTERM) to the container's exit
	exitCode   int32
	reason     string
	terminated bool   // a terminated state was reported before the pod went away
	drain      string // the drain outcome its log reported: completed, cut, or ""
}

// recorder watches the gateway pods of a namespace: how each one ended (from the last
// status the API held before the pod was deleted) and, from its log followed to the
// end, the drain outcome the gateway reported.
type recorder struct {
	c         *cluster
	ns        string
	selector  string
	mu        sync.Mutex
	last      map[types.UID]*corev1.Pod
	following map[types.UID]bool
	drains    map[types.UID]string
	// sigterm holds, per pod, when its graceful deletion began and its grace period, as
	// first seen: the kubelet's final delete later rewrites both (grace 0).
	sigterm map[types.UID]deletion
	ended   []podEnd
	logs    map[types.UID][]string // the tail of each pod's log, for failure reports
	cancel  context.CancelFunc
	done    chan struct{}
}

func (c *cluster) record(t *testing.T, ns, selector string) *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{c: c, ns: ns, selector: selector, last: map[types.UID]*corev1.Pod{},
		following: map[types.UID]bool{}, drains: map[types.UID]string{}, logs: map[types.UID][]string{},
		sigterm: map[types.UID]deletion{},
		cancel:  cancel, done: make(chan struct{})}
	w, err := c.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("watch gateway pods: %v", err)
	}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			r.observe(ctx, ev.Type, pod)
		}
	}()
	return r
}

func (r *recorder) observe(ctx context.Context, typ watch.EventType, pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last[pod.UID] = pod
	if !r.following[pod.UID] && len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].State.Running != nil {
		r.following[pod.UID] = true
		go r.follow(ctx, pod)
	}
	if _, seen := r.sigterm[pod.UID]; !seen && pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		// The API sets deletionTimestamp = the delete + the grace period; the kubelet
		// sends SIGTERM at the delete.
		g := *pod.DeletionGracePeriodSeconds
		r.sigterm[pod.UID] = deletion{at: pod.DeletionTimestamp.Add(-time.Duration(g) * time.Second), grace: g}
	}
	if typ != watch.Deleted {
		return
	}
	end := podEnd{name: pod.Name}
	del, known := r.sigterm[pod.UID]
	end.grace = del.grace
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil {
			end.terminated = true
			end.exitCode = term.ExitCode
			end.reason = term.Reason
			if known {
				end.took = term.FinishedAt.Sub(del.at)
			}
		}
	}
	r.ended = append(r.ended, end)
}

// follow reads a gateway pod's log to its end, keeping the drain outcome it reports.
func (r *recorder) follow(ctx context.Context, pod *corev1.Pod) {
	stream, err := r.c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		return
	}
	defer stream.Close()
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		r.mu.Lock()
		tail := append(r.logs[pod.UID], line)
		if len(tail) > 40 {
			tail = tail[len(tail)-40:]
		}
		r.logs[pod.UID] = tail
		if o := drainOutcome(line); o != "" {
			r.drains[pod.UID] = o
		}
		r.mu.Unlock()
	}
}

// drainOutcome finds the outcome of the drain in one log line of the gateway: its
// "Drained" line (and the InFlightDrained step) carry the outcome label that the same
// drain adds to ferrofed_drain_total, "completed" or "cut". The metric itself cannot be
// scraped from a pod that drained (its listener closed before the count moved, and the
// process exits right after): the pod pushes it to metrics.push_url instead, and the
// suite checks that push too (pushReceiver).
func drainOutcome(line string) string {
	if !strings.Contains(line, "InFlightDrained") && !strings.Contains(line, "ferrofed_drain_total") && !strings.Contains(line, "Drain") {
		return ""
	}
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) == nil {
		for _, k := range []string{"outcome", "drain", "result"} {
			if v, ok := m[k].(string); ok && (v == "completed" || v == "cut") {
				return v
			}
		}
	}
	for _, o := range []string{"completed", "cut"} {
		if strings.Contains(line, `outcome="`+o+`"`) || strings.Contains(line, "outcome="+o) || strings.Contains(line, `"outcome":"`+o+`"`) {
			return o
		}
	}
	return ""
}

// stop ends the watch and returns how every deleted pod ended, with its drain outcome.
func (r *recorder) stop() []podEnd {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]podEnd(nil), r.ended...)
	for i := range out {
		for uid, p := range r.last {
			if p.Name == out[i].name {
				out[i].drain = r.drains[uid]
			}
		}
	}
	return out
}

// logTail returns the last lines a pod logged, for a failure message.
func (r *recorder) logTail(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, p := range r.last {
		if p.Name == name {
			return strings.Join(r.logs[uid], "\n")
		}
	}
	return ""
}

// ---------------------------------------------------------------------------- locality

// onThisMachine reports whether every address is on a network of one of this machine's
// interfaces: the load steps send requests only to such targets.
func onThisMachine(addrs []string) (bool, string) {
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		return false, err.Error()
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		local := false
		for _, ia := range ifaces {
			if n, ok := ia.(*net.IPNet); ok && n.Contains(ip) && !n.IP.IsLoopback() {
				local = true
			}
		}
		if !local {
			return false, fmt.Sprintf("%s is on no network of this machine", a)
		}
	}
	return len(addrs) > 0, "no endpoint"
}

// endpointAddrs are the ready endpoint addresses of a Service.
func (c *cluster) endpointAddrs(ctx context.Context, svc *corev1.Service) ([]string, error) {
	slices, err := c.kube.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc.Name})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	return out, nil
}
