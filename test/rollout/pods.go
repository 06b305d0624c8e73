package rollout

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

type deletion struct {
	at    time.Time
	grace int64
}

// PodEnd is how one gateway pod ended.
type PodEnd struct {
	Name       string
	Grace      int64         // the pod's terminationGracePeriodSeconds at deletion
	Took       time.Duration // from the deletion (SIGTERM) to the container's exit
	ExitCode   int32
	Reason     string
	Terminated bool   // a terminated state was reported before the pod went away
	Message    string // the container's termination message (the drain's report)
	Drain      string // the drain outcome its log reported: completed, cut, or ""
}

// Hooks are called, when set, as the recorder sees things happen; from the recorder's
// own goroutines, one call at a time.
type Hooks struct {
	// Deleting: a pod's graceful deletion began; the kubelet sends SIGTERM now.
	Deleting func(pod string, grace int64)
	// Line: a line of a pod's log.
	Line func(pod, line string)
	// Ended: a pod went away.
	Ended func(PodEnd)
}

// Recorder watches the gateway pods of a namespace: how each one ended (from the last
// status the API held before the pod was deleted) and, from its log followed to the
// end, the drain outcome the gateway reported.
type Recorder struct {
	kube      kubernetes.Interface
	hooks     Hooks
	hookMu    sync.Mutex
	mu        sync.Mutex
	last      map[types.UID]*corev1.Pod
	following map[types.UID]bool
	drains    map[types.UID]string
	// sigterm holds, per pod, when its graceful deletion began and its grace period, as
	// first seen: the kubelet's final delete later rewrites both (grace 0).
	sigterm map[types.UID]deletion
	ended   []PodEnd
	logs    map[types.UID][]string // the tail of each pod's log, for failure reports
	cancel  context.CancelFunc
	done    chan struct{}
}

// Record starts watching the pods of ns that selector matches.
func Record(kube kubernetes.Interface, ns, selector string, hooks Hooks) (*Recorder, error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{kube: kube, hooks: hooks, last: map[types.UID]*corev1.Pod{},
		following: map[types.UID]bool{}, drains: map[types.UID]string{}, logs: map[types.UID][]string{},
		sigterm: map[types.UID]deletion{},
		cancel:  cancel, done: make(chan struct{})}
	w, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch the pods of %s (%s): %w", ns, selector, err)
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
	return r, nil
}

func (r *Recorder) hook(f func()) {
	r.hookMu.Lock()
	defer r.hookMu.Unlock()
	f()
}

func (r *Recorder) observe(ctx context.Context, typ watch.EventType, pod *corev1.Pod) {
	var after []func()
	defer func() {
		for _, f := range after {
			r.hook(f)
		}
	}()
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
		if r.hooks.Deleting != nil {
			name := pod.Name
			after = append(after, func() { r.hooks.Deleting(name, g) })
		}
	}
	if typ != watch.Deleted {
		return
	}
	end := PodEnd{Name: pod.Name}
	del, known := r.sigterm[pod.UID]
	end.Grace = del.grace
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil {
			end.Terminated = true
			end.ExitCode = term.ExitCode
			end.Reason = term.Reason
			end.Message = term.Message
			if known {
				end.Took = term.FinishedAt.Sub(del.at)
			}
		}
	}
	r.ended = append(r.ended, end)
	if r.hooks.Ended != nil {
		after = append(after, func() { r.hooks.Ended(end) })
	}
}

// follow reads a gateway pod's log to its end, keeping the drain outcome it reports.
func (r *Recorder) follow(ctx context.Context, pod *corev1.Pod) {
	stream, err := r.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
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
		if o := DrainOutcome(line); o != "" {
			r.drains[pod.UID] = o
		}
		r.mu.Unlock()
		if r.hooks.Line != nil {
			r.hook(func() { r.hooks.Line(pod.Name, line) })
		}
	}
}

// DrainOutcome finds the outcome of the drain in one log line of the gateway: its
// "Drained" line (and the InFlightDrained step) carry the outcome label that the same
// drain adds to ferrofed_drain_total, "completed" or "cut". The metric itself cannot be
// scraped from a pod that drained (its listener closed before the count moved, and the
// process exits right after): the pod pushes it to metrics.push_url instead.
func DrainOutcome(line string) string {
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

// Stop ends the watch and returns how every deleted pod ended, with its drain outcome.
func (r *Recorder) Stop() []PodEnd {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]PodEnd(nil), r.ended...)
	for i := range out {
		for uid, p := range r.last {
			if p.Name == out[i].Name {
				out[i].Drain = r.drains[uid]
			}
		}
	}
	return out
}

// Ended is how many pods went away so far.
func (r *Recorder) Ended() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ended)
}

// LogTail returns the last lines a pod logged, for a failure message.
func (r *Recorder) LogTail(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, p := range r.last {
		if p.Name == name {
			return strings.Join(r.logs[uid], "\n")
		}
	}
	return ""
}
