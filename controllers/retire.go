package controllers

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// Retiring pods (docs/operator.md, "Retiring pods"): a switch from the emptyDir spool to
// a claim per replica must lose no record, but the Deployment's pods keep their spools
// in emptyDirs, which go with the pods. So the operator does not delete those pods: it
// deletes the Deployment and its ReplicaSets with the Orphan policy, takes each pod out
// of the Service and of its ReplicaSet (its selector labels removed, the Gateway as its
// only owner) and leaves it running, delivering what its spool holds. It reads the
// pod's backlog from its /metrics and deletes the pod once the spool reads empty.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;delete

const (
	// LabelRetiringOf is on a retiring pod: the name of its Gateway.
	LabelRetiringOf = "ferrofed.io/retiring-of"
	// labelPodTemplateHash is on every pod a Deployment's ReplicaSet made.
	labelPodTemplateHash = "pod-template-hash"
	// RetirePollInterval is how often a retiring pod's backlog is read.
	RetirePollInterval = 10 * time.Second
	// RetireReadTimeout bounds one read of a retiring pod's metrics.
	RetireReadTimeout = 2 * time.Second
	// retireReadBytes bounds the metrics page read from a retiring pod.
	retireReadBytes = 4 << 20
	// retireReaders bounds the reads under way at once for one Gateway.
	retireReaders = 8
	// metricBacklogRecords and metricBacklogBytes are the gateway's live backlog
	// (docs/audit-spool.md, "The live backlog").
	metricBacklogRecords = "ferrofed_audit_spool_undelivered_records"
	metricBacklogBytes   = "ferrofed_audit_spool_undelivered_bytes"
)

// NewPodReader is the HTTP client the operator reads retiring pods' metrics with: no
// proxy, no redirects, RetireReadTimeout per read. Over TLS it does not verify the
// pod's certificate: it dials the pod's IP, which no serving certificate names, and it
// reads only two counts (docs/operator.md, "Retiring pods").
func NewPodReader() *http.Client {
	return podClient(RetireReadTimeout, &http.Transport{DisableKeepAlives: true})
}

// podClient is a client of the operator's for reading its pods through tr: no proxy,
// no redirects, timeout per call, and over TLS no verification of the pod's
// certificate (above).
func podClient(timeout time.Duration, tr *http.Transport) *http.Client {
	tr.Proxy = nil
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // see NewPodReader
	return &http.Client{Timeout: timeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// retiringResult is what one pass over a Gateway's retiring pods found.
type retiringResult struct {
	// pods are the retiring pods still held, by name, at most MaxRetiringPods.
	pods []ferrofedv1alpha1.RetiringPodStatus
	// held counts every retiring pod still held.
	held int
	// records and bytes are the held pods' backlog as last read.
	records, bytes int64
	requeue        time.Duration
}

// backlog is one read of a pod's spools.
type backlog struct {
	records, bytes int64
	err            error
}

// parseBacklog sums the live backlog gauges of every destination in a Prometheus
// text page; it fails when the page has no records gauge (an image from before the
// gauges, or a spool not open).
func parseBacklog(r io.Reader) (records, size int64, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	found := false
	for sc.Scan() {
		line := sc.Text()
		var sum *int64
		var rest string
		if after, ok := cutMetric(line, metricBacklogRecords); ok {
			sum, rest, found = &records, after, true
		} else if after, ok := cutMetric(line, metricBacklogBytes); ok {
			sum, rest = &size, after
		} else {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, 0, fmt.Errorf("a backlog gauge without a value: %q", truncate(line, 200))
		}
		v, perr := strconv.ParseFloat(fields[0], 64)
		if perr != nil || !(v >= 0 && v <= 1<<53) { // NaN too
			return 0, 0, fmt.Errorf("a backlog gauge of value %q", fields[0])
		}
		*sum += int64(v)
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("read the metrics: %w", err)
	}
	if !found {
		return 0, 0, fmt.Errorf("the pod's metrics have no %s (an image older than the gauge, or its spool is not open)", metricBacklogRecords)
	}
	return records, size, nil
}

// cutMetric is the rest of a sample line of metric name (labels and value), or false.
func cutMetric(line, name string) (string, bool) {
	rest, ok := strings.CutPrefix(line, name)
	if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
		return "", false
	}
	return rest, true
}

// metricsURL is where a retiring pod of gw serves its metrics: the pod's IP, the
// Gateway's port and scheme, base path and metrics.path of the rendered configuration.
func metricsURL(gw *ferrofedv1alpha1.Gateway, rendered []byte, podIP string) (string, error) {
	if podIP == "" {
		return "", errors.New("the pod has no IP")
	}
	scheme, urlPath, err := metricsEndpoint(gw, rendered)
	if err != nil {
		return "", errors.New("metrics.disabled is set: the operator cannot read the pod's backlog; once you know its spool is delivered, delete the pod by hand (records it still holds are lost with it)")
	}
	host := net.JoinHostPort(podIP, strconv.Itoa(int(gw.Spec.PortOrDefault())))
	return scheme + "://" + host + urlPath, nil
}

// readBacklog reads one pod's backlog.
func (r *GatewayReconciler) readBacklog(ctx context.Context, url string) backlog {
	hc := r.PodReader
	if hc == nil {
		hc = NewPodReader()
	}
	ctx, cancel := context.WithTimeout(ctx, RetireReadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return backlog{err: err}
	}
	res, err := hc.Do(req)
	if err != nil {
		return backlog{err: fmt.Errorf("read its metrics: %w", err)}
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return backlog{err: fmt.Errorf("its metrics answered %d", res.StatusCode)}
	}
	records, size, err := parseBacklog(io.LimitReader(res.Body, retireReadBytes))
	return backlog{records: records, bytes: size, err: err}
}

// retireAction is what to do with one pod of a Gateway's Deployment once the
// Deployment is gone: retire it, or wait while a ReplicaSet that still manages it
// (not deleted) could replace it.
func retireAction(pod *corev1.Pod, liveReplicaSets map[string]bool) bool {
	if pod.DeletionTimestamp != nil || pod.Labels[labelPodTemplateHash] == "" {
		return false
	}
	if c := metav1.GetControllerOf(pod); c != nil && c.Kind == "ReplicaSet" && liveReplicaSets[c.Name] {
		return false
	}
	return true
}

// releaseDeploymentPods takes the pods of gw's deleted Deployment out of their
// ReplicaSets and the Service: each ReplicaSet is deleted with the Orphan policy, and
// each pod no live ReplicaSet manages any more becomes a retiring pod. It reports
// whether pods wait for their ReplicaSet's deletion.
func (r *GatewayReconciler) releaseDeploymentPods(ctx context.Context, gw *ferrofedv1alpha1.Gateway) (bool, error) {
	reader := r.reader()
	sel := client.MatchingLabels(SelectorLabels(gw))
	ns := client.InNamespace(gw.Namespace)
	var sets appsv1.ReplicaSetList
	if err := reader.List(ctx, &sets, ns, sel); err != nil {
		return false, fmt.Errorf("list the ReplicaSets: %w", err)
	}
	live := map[string]bool{}
	var errs []error
	for i := range sets.Items {
		rs := &sets.Items[i]
		if rs.DeletionTimestamp != nil {
			continue
		}
		live[rs.Name] = true
		err := r.Delete(ctx, rs, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: ptr.To(rs.UID)})
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete ReplicaSet %s, orphaning its pods: %w", rs.Name, err))
		}
	}
	var pods corev1.PodList
	if err := reader.List(ctx, &pods, ns, sel); err != nil {
		return false, errors.Join(append(errs, fmt.Errorf("list the Deployment's pods: %w", err))...)
	}
	waiting := false
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Labels[labelPodTemplateHash] == "" {
			continue
		}
		// A ReplicaSet deleted just now may still be live in this list: its pods wait
		// for the next pass.
		if !retireAction(p, live) {
			waiting = true
			continue
		}
		if err := r.retire(ctx, gw, p); err != nil {
			errs = append(errs, err)
		}
	}
	return waiting, errors.Join(errs...)
}

// retire makes p a retiring pod of gw with one patch, conditional on its
// resourceVersion: the selector labels go (out of the Service and every ReplicaSet's
// selector), LabelRetiringOf comes, and the Gateway becomes its only owner (not its
// controller), so that the Gateway's finalizer holds it.
func (r *GatewayReconciler) retire(ctx context.Context, gw *ferrofedv1alpha1.Gateway, p *corev1.Pod) error {
	owner := metav1.OwnerReference{APIVersion: ferrofedv1alpha1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID}
	labels := map[string]any{LabelRetiringOf: gw.Name}
	for k := range SelectorLabels(gw) {
		labels[k] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": p.ResourceVersion,
		"labels": labels, "ownerReferences": []metav1.OwnerReference{owner}}})
	if err != nil {
		return err
	}
	if err := r.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("retire pod %s: %w", p.Name, client.IgnoreNotFound(err))
	}
	r.Recorder.Eventf(gw, p, corev1.EventTypeNormal, "PodRetiring", "Retire",
		"Pod %s of the emptyDir Deployment is out of the Service and keeps running until its audit spool is delivered; then the operator deletes it.", p.Name)
	return nil
}

// reader reads around the cache (retiring pods and ReplicaSets are not in it as a
// whole), or through the client when there is no APIReader.
func (r *GatewayReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// reconcileRetiring makes one pass over gw's retiring pods: with a persistent spool
// and no Deployment left, the Deployment's pods are retired first
// (releaseDeploymentPods); then each retiring pod's backlog is read, a pod that reads
// empty is deleted (it drains as usual, with nothing left to deliver), and the others
// are kept and listed.
func (r *GatewayReconciler) reconcileRetiring(ctx context.Context, gw *ferrofedv1alpha1.Gateway, rendered []byte) (retiringResult, error) {
	var res retiringResult
	var errs []error
	if gw.Spec.PersistentSpool() && gw.DeletionTimestamp.IsZero() && !r.deploymentLeft(ctx, gw) {
		waiting, err := r.releaseDeploymentPods(ctx, gw)
		errs = append(errs, err)
		if waiting {
			res.requeue = time.Second
		}
	}
	var pods corev1.PodList
	if err := r.reader().List(ctx, &pods, client.InNamespace(gw.Namespace), client.MatchingLabels{LabelRetiringOf: gw.Name}); err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("list the retiring pods: %w", err))...)
	}
	var held []*corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			held = append(held, &pods.Items[i])
		}
	}
	slices.SortFunc(held, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	reads := r.readBacklogs(ctx, gw, rendered, held)
	now := metav1.Now()
	prev := map[string]ferrofedv1alpha1.RetiringPodStatus{}
	if gw.Status.Audit != nil {
		for _, p := range gw.Status.Audit.RetiringPods {
			prev[p.Name] = p
		}
	}
	for i, p := range held {
		b := reads[i]
		if b.err == nil && b.records == 0 {
			err := r.Delete(ctx, p, client.Preconditions{UID: ptr.To(p.UID)})
			if err == nil {
				r.Recorder.Eventf(gw, p, corev1.EventTypeNormal, "PodRetired", "Retire",
					"Deleted retiring pod %s: its audit spool read empty, every record delivered.", p.Name)
				continue
			}
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete retiring pod %s: %w", p.Name, err))
			}
		}
		st := ferrofedv1alpha1.RetiringPodStatus{Name: p.Name, UndeliveredRecords: b.records, UndeliveredBytes: b.bytes, LastRead: &now}
		if b.err != nil {
			// The figures stay as last read; the message says why they are not new.
			last := prev[p.Name]
			st.UndeliveredRecords, st.UndeliveredBytes, st.LastRead = last.UndeliveredRecords, last.UndeliveredBytes, last.LastRead
			st.Message = truncate(b.err.Error(), 1024)
		}
		res.held++
		res.records += st.UndeliveredRecords
		res.bytes += st.UndeliveredBytes
		if len(res.pods) < ferrofedv1alpha1.MaxRetiringPods {
			res.pods = append(res.pods, st)
		}
	}
	if res.held > 0 && (res.requeue == 0 || res.requeue > RetirePollInterval) {
		res.requeue = RetirePollInterval
	}
	return res, errors.Join(errs...)
}

// readBacklogs reads each pod's backlog, at most retireReaders at once.
func (r *GatewayReconciler) readBacklogs(ctx context.Context, gw *ferrofedv1alpha1.Gateway, rendered []byte, pods []*corev1.Pod) []backlog {
	out := make([]backlog, len(pods))
	sem := make(chan struct{}, retireReaders)
	var wg sync.WaitGroup
	for i, p := range pods {
		url, err := metricsURL(gw, rendered, p.Status.PodIP)
		if err != nil {
			out[i] = backlog{err: err}
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = r.readBacklog(ctx, url)
		})
	}
	wg.Wait()
	return out
}

// deploymentLeft reports whether gw's Deployment still exists and is not being
// deleted: its pods are its ReplicaSets' until then.
func (r *GatewayReconciler) deploymentLeft(ctx context.Context, gw *ferrofedv1alpha1.Gateway) bool {
	d := &appsv1.Deployment{}
	err := r.reader().Get(ctx, client.ObjectKeyFromObject(gw), d)
	return err == nil && d.DeletionTimestamp == nil || err != nil && !apierrors.IsNotFound(err)
}

// releaseRetiringPods lets a deleted Gateway's retiring pods go on without it
// (retainOnDelete): its owner reference is removed, so that the garbage collector
// leaves them running, and the pods are named in an Event.
func (r *GatewayReconciler) releaseRetiringPods(ctx context.Context, gw *ferrofedv1alpha1.Gateway) error {
	var pods corev1.PodList
	if err := r.reader().List(ctx, &pods, client.InNamespace(gw.Namespace), client.MatchingLabels{LabelRetiringOf: gw.Name}); err != nil {
		return fmt.Errorf("list the retiring pods: %w", err)
	}
	var names []string
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": p.ResourceVersion, "ownerReferences": nil}})
		if err != nil {
			return err
		}
		if err := r.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("release retiring pod %s: %w", p.Name, err))
			continue
		}
		names = append(names, p.Name)
	}
	if len(names) > 0 {
		slices.Sort(names)
		r.Recorder.Eventf(gw, nil, corev1.EventTypeNormal, "RetiringPodsRetained", "Delete",
			"spec.audit.spool.retainOnDelete: kept %d retiring pod(s) running without the Gateway: %s. Their emptyDir spools keep delivering; delete each once its ferrofed_audit_spool_undelivered_records reads 0.",
			len(names), nameList(names))
	}
	return errors.Join(errs...)
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
