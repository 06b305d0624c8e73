package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// Polling the pods (docs/operator.md, "The operator reads its pods").
const (
	// DefaultDependencyPollInterval is --dependency-poll-interval's default.
	DefaultDependencyPollInterval = 30 * time.Second
	// DefaultDependencyPollConcurrency is --dependency-poll-concurrency's default: the
	// polls under way at once, over every Gateway.
	DefaultDependencyPollConcurrency = 32
	// pollCallTimeout bounds each of a poll's two calls.
	pollCallTimeout = 2 * time.Second
	// pollReportBytes and pollReadinessBytes bound what a poll reads of each answer.
	pollReportBytes    = 1 << 20
	pollReadinessBytes = 64 << 10
	// pollRefresh is how often status.dependencies is written while nothing changes.
	pollRefresh = 5 * time.Minute
)

// DependencyPoller reads the readiness answer and the dependency report of every
// ready pod of every Gateway, once per Interval (each pod at its own offset in it,
// a little jitter on top), at most Concurrency polls at once, and keeps the last of
// each in memory. It never writes to the cluster: when a Gateway's summary changes it
// sends the Gateway on Events, and the reconcile writes the status from Summary.
type DependencyPoller struct {
	// Gateways and Pods are the stores of the cache's informers (storeOf): a round
	// walks them without copying 3,000 pods into a list.
	Gateways, Pods toolscache.Store
	Issuer         *OperatorIssuer
	Interval       time.Duration
	Concurrency    int
	HTTP           *http.Client
	Events         chan event.GenericEvent

	clientOnce sync.Once
	client     *http.Client

	mu       sync.Mutex
	gateways map[types.NamespacedName]*polledGateway
	polls    int64
}

type polledGateway struct {
	// pods are the last reports of the polled pods, sorted by pod name.
	pods []podReport
	// told is the digest (reportsDigest) of the reports last told on Events, and when:
	// a digest, not the summary, since it is kept for every Gateway.
	told   uint64
	toldAt time.Time
}

// pollTarget is one pod to poll (the token's audience is made when it is polled: a
// round's list waits a whole interval).
type pollTarget struct {
	gateway types.NamespacedName
	pod     string
	base    string // scheme://ip:port{basePath}
	offset  time.Duration
}

// NeedLeaderElection: only the leader polls (its reconciles write the status).
func (p *DependencyPoller) NeedLeaderElection() bool { return true }

// Start polls until ctx ends.
func (p *DependencyPoller) Start(ctx context.Context) error {
	sem := make(chan struct{}, max(p.Concurrency, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		start := time.Now()
		targets := p.targets()
		for _, t := range targets {
			if !sleepUntil(ctx, start.Add(t.offset)) {
				return nil
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Go(func() {
				defer func() { <-sem }()
				p.record(t, p.poll(ctx, t))
			})
		}
		if !sleepUntil(ctx, start.Add(p.Interval)) {
			return nil
		}
	}
	return nil
}

func sleepUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// targets lists the ready pods of every Gateway from the cache, each with its offset
// in the interval, and forgets the pods (and Gateways) no longer there.
func (p *DependencyPoller) targets() []pollTarget {
	// The cached objects themselves: read, never changed.
	byGateway := map[types.NamespacedName][]*cachedPod{}
	for _, o := range p.Pods.List() {
		pod, ok := o.(*cachedPod)
		if !ok || pod.Labels[LabelName] != "ferrofed" {
			continue
		}
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Labels[LabelInstance]}
		byGateway[key] = append(byGateway[key], pod)
	}
	var out []pollTarget
	live := map[types.NamespacedName]map[string]bool{}
	for _, o := range p.Gateways.List() {
		gw, ok := o.(*ferrofedv1alpha1.Gateway)
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
		live[key] = map[string]bool{}
		if gw.Spec.ClientCertificatesRequired() {
			continue // never polled (Summary)
		}
		for _, pod := range byGateway[key] {
			if !podReady(pod) || pod.ip == "" {
				continue
			}
			live[key][pod.Name] = true
			out = append(out, pollTarget{gateway: key, pod: pod.Name, base: podBase(gw, pod.ip), offset: p.offset(string(pod.UID))})
		}
	}
	p.forget(live)
	slices.SortFunc(out, func(a, b pollTarget) int { return int(a.offset - b.offset) })
	return out
}

// storeOf is the store of the cache's informer of obj's kind (made now if the cache has
// none yet; it fills once the cache starts), or one kept from its events.
func storeOf(ctx context.Context, informers cache.Informers, obj client.Object) (toolscache.Store, error) {
	inf, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("the cache's informer of %T: %w", obj, err)
	}
	if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
		return s.GetStore(), nil
	}
	// A cache of some namespaces only (--watch-namespaces) has an informer per
	// namespace behind one without a store: a store of the same objects (shared, not
	// copied) is kept from its events. It may trail the informers by an event; what
	// reads it copes with a missing object (an apply reads it again from the
	// apiserver).
	mirror := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { _ = mirror.Add(o) },
		UpdateFunc: func(_, o any) { _ = mirror.Update(o) },
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			_ = mirror.Delete(o)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("follow the cache's informer of %T: %w", obj, err)
	}
	return mirror, nil
}

// offset is a pod's place in the interval: fixed by its UID (so that it is polled
// once per interval), plus up to a twentieth of the interval at random.
func (p *DependencyPoller) offset(uid string) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	span := p.Interval * 19 / 20
	return time.Duration(uint64(h.Sum32())%1000)*span/1000 + rand.N(p.Interval/20+1)
}

func podReady(pod *cachedPod) bool {
	return pod.DeletionTimestamp == nil && pod.Labels[LabelRetiringOf] == "" && pod.ready
}

func podBase(gw *ferrofedv1alpha1.Gateway, ip string) string {
	scheme := "http"
	if gw.Spec.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(ip, strconv.Itoa(int(gw.Spec.PortOrDefault()))) + strings.TrimSuffix(path.Clean("/"+gw.Spec.BasePathOrDefault()), "/")
}

// pollClient is the client of every poll. A poll's two calls share one connection
// (and one TLS handshake): the first leaves it idle for the second, which closes it
// (get); nothing is kept between polls, which would be an idle connection to every pod
// of every Gateway (a poll that stops after its first call leaves its connection idle
// for at most pollIdleTimeout). Over TLS the pod's certificate is not verified, as
// NewPodReader says why. The answers are small: no compression.
func (p *DependencyPoller) pollClient() *http.Client {
	if p.HTTP != nil {
		return p.HTTP
	}
	p.clientOnce.Do(func() {
		p.client = podClient(pollCallTimeout, &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: pollIdleTimeout,
			DisableCompression: true, ReadBufferSize: 2 << 10, WriteBufferSize: 1 << 10})
	})
	return p.client
}

// pollIdleTimeout is how long a poll's connection may wait idle between its two calls.
const pollIdleTimeout = 5 * time.Second

// poll reads one pod's readiness answer and dependency report.
func (p *DependencyPoller) poll(ctx context.Context, t pollTarget) podReport {
	hc := p.pollClient()
	r := podReport{pod: t.pod}
	var ready struct {
		Phase string `json:"phase"`
	}
	if body, err := p.get(ctx, hc, t.base+"/health/readiness?verbose=0", "", pollReadinessBytes, true, false); err == nil {
		if json.Unmarshal(body, &ready) == nil {
			r.phase = knownPhase(ready.Phase)
		}
	}
	token, err := p.Issuer.Token(gatewayspec.OperatorAudience(t.gateway.Namespace, t.gateway.Name), time.Now())
	if err != nil {
		r.failure = "the operator could not sign its token"
		return r
	}
	body, err := p.get(ctx, hc, t.base+"/operator/dependencies", token, pollReportBytes, false, true)
	if err != nil {
		r.failure = err.Error()
		return r
	}
	states, err := parseReport(body)
	if err != nil {
		r.failure = err.Error()
		return r
	}
	r.states = states
	return r
}

// errPoll classes: the status names the class, never an address or a body.
var (
	errUnreachable = errors.New("the pod did not answer in time")
	errRefused     = errors.New("the pod refused the operator's token (an image without read-only issuers, or a configuration not yet rolled out)")
	errAnswer      = errors.New("the pod answered the report with an error status")
	errTooLarge    = errors.New("the pod's report is over 1 MiB")
)

// get reads url; anyStatus takes a readiness 503's body too; last closes the
// connection after the answer.
func (p *DependencyPoller) get(ctx context.Context, hc *http.Client, url, token string, limit int64, anyStatus, last bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, pollCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, errAnswer
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Close = last
	res, err := hc.Do(req)
	if err != nil {
		return nil, errUnreachable
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden:
		return nil, errRefused
	case res.StatusCode != http.StatusOK && !anyStatus:
		return nil, errAnswer
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, errUnreachable
	}
	if int64(len(body)) > limit {
		return nil, errTooLarge
	}
	return body, nil
}

// record keeps r as its pod's last report and tells the Gateway when its summary
// changed (or was last told pollRefresh ago).
func (p *DependencyPoller) record(t pollTarget, r podReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	if p.gateways == nil {
		p.gateways = map[types.NamespacedName]*polledGateway{}
	}
	g := p.gateways[t.gateway]
	if g == nil {
		g = &polledGateway{}
		p.gateways[t.gateway] = g
	}
	i, found := slices.BinarySearchFunc(g.pods, t.pod, func(r podReport, pod string) int { return strings.Compare(r.pod, pod) })
	if !found {
		g.pods = slices.Insert(g.pods, i, podReport{pod: t.pod})
	}
	if r.states != nil && auditNotUp(r.states) {
		r.auditNotUp = g.pods[i].auditNotUp + 1
	}
	if prev := g.pods[i].states; sameKeys(prev, r.states) {
		// The states kept live as long as the pod is polled: the slice made by the
		// last poll is reused and this poll's is left to the collector, so that polls
		// do not scatter long-lived pieces among their garbage.
		copy(prev, r.states)
		r.states = prev
	}
	g.pods[i] = r
	p.tellLocked(t.gateway, g)
}

// sameKeys reports whether a and b are read reports of the same keys, in order.
func sameKeys(a, b reportStates) bool {
	return a != nil && b != nil && slices.EqualFunc(a, b, func(x, y keyState) bool { return x.key == y.key })
}

// reportsDigest is a digest of what status.dependencies and the audit condition are
// made of: reports (sorted by pod) that have the same digest have the same summary.
func reportsDigest(reports []podReport) uint64 {
	h := fnv.New64a()
	for _, r := range reports {
		_, _ = h.Write([]byte(r.pod))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(r.phase))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(r.failure))
		flags := byte(0)
		if r.states != nil {
			flags |= 1
		}
		if r.auditNotUp >= auditDegradedPolls {
			flags |= 2
		}
		_, _ = h.Write([]byte{0, flags})
		for _, ks := range r.states {
			_, _ = h.Write([]byte(ks.Key()))
			_, _ = h.Write([]byte{ks.state})
		}
		_, _ = h.Write([]byte{0xff})
	}
	return h.Sum64()
}

// tellLocked sends the Gateway on Events when its summary differs from the one last
// told, or that is older than pollRefresh. A full channel drops the send: the next
// poll tells again.
func (p *DependencyPoller) tellLocked(key types.NamespacedName, g *polledGateway) {
	sum := reportsDigest(g.pods)
	if !g.toldAt.IsZero() && sum == g.told && time.Since(g.toldAt) < pollRefresh {
		return
	}
	gw := &ferrofedv1alpha1.Gateway{}
	gw.Namespace, gw.Name = key.Namespace, key.Name
	select {
	case p.Events <- event.GenericEvent{Object: gw}:
		g.told, g.toldAt = sum, time.Now()
	default:
	}
}

// forget drops the pods that are not live, and the Gateways gone, and tells each
// Gateway that lost a polled pod.
func (p *DependencyPoller) forget(live map[types.NamespacedName]map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, g := range p.gateways {
		pods, ok := live[key]
		if !ok {
			delete(p.gateways, key)
			continue
		}
		n := len(g.pods)
		g.pods = slices.DeleteFunc(g.pods, func(r podReport) bool { return !pods[r.pod] })
		if len(g.pods) != n {
			p.tellLocked(key, g)
		}
	}
}

// noReadyPod is why a Gateway without a ready pod (or not looked at yet) is not polled.
const noReadyPod = "No pod of the Gateway is ready: nothing is polled."

// pollSummary is what the reconcile of one Gateway writes from the polls.
type pollSummary struct {
	// deps is status.dependencies, nil when no pod was polled.
	deps *ferrofedv1alpha1.DependenciesStatus
	// reports are the polled pods' reports without their states.
	reports []podReport
	// why nothing was read, for the Unknown conditions.
	why string
}

// Summary is what the polls say of gw.
func (p *DependencyPoller) Summary(gw *ferrofedv1alpha1.Gateway) pollSummary {
	if gw.Spec.ClientCertificatesRequired() {
		return pollSummary{why: "The Gateway's listener requires client certificates, which the operator does not present: its pods are not polled."}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gateways[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}]
	if g == nil || len(g.pods) == 0 {
		return pollSummary{why: noReadyPod}
	}
	d := summarize(g.pods)
	// The copies leave the lock without their states, which later polls write in
	// place (record); the audit condition reads the counts only.
	reports := slices.Clone(g.pods)
	for i := range reports {
		reports[i].states = nil
	}
	if !g.toldAt.IsZero() {
		d.LastPollTime = &metav1.Time{Time: g.toldAt.Truncate(time.Second)}
	}
	return pollSummary{deps: d, reports: reports, why: "No ready pod's report could be read."}
}

// Polls is how many polls have completed.
func (p *DependencyPoller) Polls() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls
}

// operatorJWKS is the key set the Gateways' ConfigMaps carry, "" when nothing polls.
func (r *GatewayReconciler) operatorJWKS() string {
	if r.Poller == nil {
		return ""
	}
	return r.Poller.Issuer.JWKS()
}

// tellDependencies emits an Event for each of MembersReachable, BindingsHealthy and
// AuditDelivering (when degraded by the reports) whose status changed from a known one.
func (r *GatewayReconciler) tellDependencies(gw *ferrofedv1alpha1.Gateway, before, after []metav1.Condition) {
	for _, t := range []string{ferrofedv1alpha1.ConditionMembersReachable, ferrofedv1alpha1.ConditionBindingsHealthy, ferrofedv1alpha1.ConditionAuditDelivering} {
		now := meta.FindStatusCondition(after, t)
		was := meta.FindStatusCondition(before, t)
		switch {
		case now == nil, now.Status == metav1.ConditionUnknown:
			continue
		case now.Status == metav1.ConditionTrue && (was == nil || was.Status != metav1.ConditionFalse):
			continue // a recovery is told; a first True is not
		case was != nil && was.Status == now.Status && was.Reason == now.Reason && was.Message == now.Message:
			continue
		}
		if t == ferrofedv1alpha1.ConditionAuditDelivering && now.Reason != ferrofedv1alpha1.ReasonAuditDegraded &&
			(was == nil || was.Reason != ferrofedv1alpha1.ReasonAuditDegraded) {
			continue // the spool's own conditions tell their Events (spool.go)
		}
		kind := corev1.EventTypeNormal
		if now.Status == metav1.ConditionFalse {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(gw, nil, kind, now.Reason, "Poll", "%s=%s: %s", t, now.Status, eventNote(now.Message))
	}
}
