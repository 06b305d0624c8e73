package controllers

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// cachedPod is what the operator's cache keeps of a gateway or hand-over pod
// (trimForCache): its metadata and the four things read of the rest. A corev1.Pod is
// 1,240 bytes before any of its content, most of them an empty PodSpec; this is 288,
// which with 3,000 pods (1,000 Gateways of 3 replicas) is about 3 MB less live heap
// (docs/operator.md, "The operator's memory").
//
// It is never handed to the controller-runtime client: a Get or List of pods through
// the cache would refuse its type, so the operator reads pods from the informer's
// store (podsOf) and expands one into a corev1.Pod (pod) where a function reads a pod.
type cachedPod struct {
	metav1.ObjectMeta
	// ip is status.podIP, which the dependency polls call.
	ip string
	// ready: the pod's Ready condition is True.
	ready bool
	// grace is spec.terminationGracePeriodSeconds, which a drain is measured against.
	grace *int64
	// ended are the gateway's and the hand-over's container statuses once terminated,
	// each with its name and state.terminated only: a drain's and a hand-over's report.
	ended []corev1.ContainerStatus
}

// compactPod is what the cache keeps of p.
func compactPod(p *corev1.Pod) *cachedPod {
	c := &cachedPod{ObjectMeta: p.ObjectMeta, ip: p.Status.PodIP, grace: p.Spec.TerminationGracePeriodSeconds}
	c.ManagedFields, c.Annotations = nil, nil
	for _, s := range p.Status.ContainerStatuses {
		if (s.Name == ContainerName || s.Name == HandOverContainerName) && s.State.Terminated != nil {
			c.ended = append(c.ended, corev1.ContainerStatus{Name: s.Name, State: corev1.ContainerState{Terminated: s.State.Terminated}})
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			c.ready = cond.Status == corev1.ConditionTrue
		}
	}
	return c
}

// pod expands c into a corev1.Pod with what the cache kept. The two share their
// metadata's maps and slices: the result is read, never changed.
func (c *cachedPod) pod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: c.ObjectMeta, Spec: corev1.PodSpec{TerminationGracePeriodSeconds: c.grace},
		Status: corev1.PodStatus{PodIP: c.ip, ContainerStatuses: c.ended}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if c.ready {
		p.Status.Conditions[0].Status = corev1.ConditionTrue
	}
	return p
}

// GetObjectKind: a cachedPod carries no type meta (the informer knows its kind).
func (c *cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies c, its metadata and its container statuses.
func (c *cachedPod) DeepCopyObject() runtime.Object {
	out := *c
	c.DeepCopyInto(&out.ObjectMeta)
	if c.grace != nil {
		g := *c.grace
		out.grace = &g
	}
	out.ended = make([]corev1.ContainerStatus, len(c.ended))
	for i := range c.ended {
		c.ended[i].DeepCopyInto(&out.ended[i])
	}
	if c.ended == nil {
		out.ended = nil
	}
	return &out
}

// asPod reads o, a pod as the cache keeps it (or a whole one), as a corev1.Pod.
func asPod(o any) (*corev1.Pod, bool) {
	switch p := o.(type) {
	case *cachedPod:
		return p.pod(), true
	case *corev1.Pod:
		return p, true
	}
	return nil, false
}

// podsOf lists the pods of namespace ns in store whose labels have every one of want,
// sorted by name, each expanded (pod) once it matched.
func podsOf(store toolscache.Store, ns string, want map[string]string) ([]corev1.Pod, error) {
	objs := store.List
	if ix, ok := store.(toolscache.Indexer); ok && ix.GetIndexers()[toolscache.NamespaceIndex] != nil {
		in, err := ix.ByIndex(toolscache.NamespaceIndex, ns)
		if err != nil {
			return nil, fmt.Errorf("the cached pods of namespace %s: %w", ns, err)
		}
		objs = func() []any { return in }
	}
	sel := labels.SelectorFromSet(want)
	var out []corev1.Pod
	for _, o := range objs() {
		// Matched before it is expanded: the namespace may hold thousands of pods.
		m, ok := o.(metav1.Object)
		if !ok || m.GetNamespace() != ns || !sel.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		if p, ok := asPod(o); ok {
			out = append(out, *p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
