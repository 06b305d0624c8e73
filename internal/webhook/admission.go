package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	kjson "sigs.k8s.io/json"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// MaxReviewBytes bounds the body of an admission review: two objects of the
// apiserver's 3 MiB request limit and 1 MiB for the rest, as controller-runtime bounds
// its webhooks.
const MaxReviewBytes = 7 << 20

// reviewIn is the part of an admission.k8s.io/v1 AdmissionReview the Gateway webhook
// reads, decoded in one pass with the object as an admittedGateway; the old object of
// an update is not decoded, since a Gateway is validated as a whole (ValidateUpdate).
type reviewIn struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID       types.UID               `json:"uid"`
		Kind      metav1.GroupVersionKind `json:"kind"`
		Namespace string                  `json:"namespace"`
		Operation admissionv1.Operation   `json:"operation"`
		Object    *admittedGateway        `json:"object"`
	} `json:"request"`
}

// admittedGateway is what the webhook decodes of a reviewed Gateway: what
// gatewayspec.Validate reads (the name for a refusal, the spec, and the recorded drains
// for their warning), its namespace (where a spec.config.configMapRef is read), and
// whether it is being deleted (ValidateUpdate), and nothing of the rest, such as the
// managed fields the apiserver sends along.
type admittedGateway struct {
	Metadata struct {
		Name              string       `json:"name"`
		Namespace         string       `json:"namespace"`
		DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec   ferrofedv1alpha1.GatewaySpec `json:"spec"`
	Status struct {
		Drains []ferrofedv1alpha1.DrainRecord `json:"drains"`
	} `json:"status"`
}

// gateway is the Gateway of a that gatewayspec.Validate sees.
func (a *admittedGateway) gateway() *ferrofedv1alpha1.Gateway {
	g := &ferrofedv1alpha1.Gateway{Spec: a.Spec}
	g.Name, g.Namespace, g.Status.Drains = a.Metadata.Name, a.Metadata.Namespace, a.Status.Drains
	g.DeletionTimestamp = a.Metadata.DeletionTimestamp
	return g
}

var gatewayKind = metav1.GroupVersionKind{Group: ferrofedv1alpha1.GroupVersion.Group, Version: ferrofedv1alpha1.GroupVersion.Version, Kind: "Gateway"}

// ServeHTTP answers the apiserver's AdmissionReview (admission.k8s.io/v1) of a Gateway,
// as controller-runtime's validating webhook answers it (the same verdicts, codes,
// field causes and warnings; TestHandlerAnswersAsControllerRuntime), decoding less:
// the review in one pass, of its Gateway only what gatewayspec.Validate reads
// (admittedGateway), and for an update not the old Gateway at all. A review that
// cannot be read is answered allowed=false with code 400 naming what is wrong; a
// panic, with code 500; a review not done within 3/4 of the apiserver's timeout, with
// code 504 (reviewWithin).
func (v GatewayValidator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var uid types.UID
	defer func() {
		if p := recover(); p != nil {
			logf.FromContext(r.Context()).Error(fmt.Errorf("panic: %v", p), "Gateway webhook", "stack", string(debug.Stack()))
			writeReview(w, uid, failed(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", p)))
		}
	}()
	buf := reviewBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledReview {
			buf.Reset()
			reviewBuffers.Put(buf)
		}
	}()
	if err := readReview(r, buf); err != nil {
		writeReview(w, "", failed(http.StatusBadRequest, err))
		return
	}
	var in reviewIn
	if err := kjson.UnmarshalCaseSensitivePreserveInts(buf.Bytes(), &in); err != nil {
		writeReview(w, "", failed(http.StatusBadRequest, fmt.Errorf("decode the AdmissionReview (its request.object as a Gateway): %w", err)))
		return
	}
	if in.APIVersion != admissionv1.SchemeGroupVersion.String() || in.Kind != "AdmissionReview" || in.Request == nil {
		writeReview(w, "", failed(http.StatusBadRequest, fmt.Errorf(
			"want an admission.k8s.io/v1 AdmissionReview with a request, got apiVersion %q, kind %q (request present: %t)",
			in.APIVersion, in.Kind, in.Request != nil)))
		return
	}
	uid = in.Request.UID
	if o := in.Request.Object; o != nil && o.Metadata.Namespace == "" {
		o.Metadata.Namespace = in.Request.Namespace // the review's, where the object's is not set
	}
	resp := v.reviewWithin(r.Context(), reviewBudget(r), in.Request.Operation, in.Request.Kind, in.Request.Object)
	buf.Reset() // the body is read: the buffer takes the answer
	writeReviewVia(w, buf, uid, resp)
}

// DefaultReviewTimeout is how long the apiserver waits for the webhook when its
// timeoutSeconds is not set (and the chart's webhook.timeoutSeconds); MaxReviewTimeout is
// the longest timeoutSeconds the apiserver accepts.
const (
	DefaultReviewTimeout = 10 * time.Second
	MaxReviewTimeout     = 30 * time.Second
)

// reviewBudget is how long ServeHTTP gives one review: three quarters of the time the
// apiserver waits for its answer, which the apiserver's webhook client sends as the
// query parameter timeout (the webhook's timeoutSeconds, "10s"); of
// DefaultReviewTimeout when it is absent or not a duration up to MaxReviewTimeout.
func reviewBudget(r *http.Request) time.Duration {
	t := DefaultReviewTimeout
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 && d <= MaxReviewTimeout {
		t = d
	}
	return t * 3 / 4
}

// beforeReview, when set (by tests), runs before each review's validation with the
// review's context.
var beforeReview func(context.Context)

// reviewWithin is review answered within budget: the review runs on its own goroutine,
// and when budget passes first the answer is a refusal naming why (code 504, reason
// Timeout), given while the apiserver still waits, instead of the apiserver's own
// timeout, which failurePolicy turns into a refusal naming nothing. What the review
// still does is bounded by the bytes it reads (ferrofedv1alpha1.MaxInlineConfigBytes, MaxReviewBytes,
// and of a referenced ConfigMap MaxReferencedConfigBytes, read within
// ConfigMapReadTimeout), and a validation linear in them (gateway/config's
// BenchmarkParseProblemAtTheEnd; a 1 MiB configuration of 13,000 members, about 150 ms).
func (v GatewayValidator) reviewWithin(ctx context.Context, budget time.Duration, op admissionv1.Operation, kind metav1.GroupVersionKind, a *admittedGateway) admissionv1.AdmissionResponse {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	done := make(chan admissionv1.AdmissionResponse, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				logf.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Gateway webhook", "stack", string(debug.Stack()))
				done <- failed(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", p))
			}
		}()
		if beforeReview != nil {
			beforeReview(ctx)
		}
		done <- v.review(ctx, op, kind, a)
	}()
	select {
	case resp := <-done:
		return resp
	case <-ctx.Done():
	}
	msg := fmt.Sprintf("the review of this Gateway did not finish within %s (3/4 of the webhook's timeout)", budget)
	if a != nil && a.Spec.Config != nil && a.Spec.Config.Inline != nil {
		msg += fmt.Sprintf(": its configuration, spec.config.inline (%d bytes), could not be checked in time; retry, or make it smaller", len(*a.Spec.Config.Inline))
	}
	return admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusGatewayTimeout, Reason: metav1.StatusReasonTimeout, Message: msg}}
}

// review is the answer to one operation on the object of a review.
func (v GatewayValidator) review(ctx context.Context, op admissionv1.Operation, kind metav1.GroupVersionKind, a *admittedGateway) admissionv1.AdmissionResponse {
	switch op {
	case admissionv1.Create, admissionv1.Update:
	case admissionv1.Delete, admissionv1.Connect:
		return allowed(nil) // ValidateDelete allows every deletion
	default:
		return failed(http.StatusBadRequest, fmt.Errorf("unknown operation %q", op))
	}
	if kind != gatewayKind {
		return failed(http.StatusBadRequest, fmt.Errorf("request.kind is %s, this webhook validates %s", kind.String(), gatewayKind.String()))
	}
	if a == nil {
		return failed(http.StatusBadRequest, fmt.Errorf("the %s review has no request.object", op))
	}
	g := a.gateway()
	var warnings []string
	var err error
	if op == admissionv1.Create {
		warnings, err = v.ValidateCreate(ctx, g)
	} else {
		warnings, err = v.ValidateUpdate(ctx, nil, g)
	}
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return allowed(warnings)
	case errors.As(err, &status):
		s := status.Status()
		return admissionv1.AdmissionResponse{Result: &s, Warnings: warnings}
	default:
		return admissionv1.AdmissionResponse{Warnings: warnings,
			Result: &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}}
	}
}

// reviewBuffers hold the bodies of reviews being answered: a review's decoded values
// are copies (strings, the raw object), so its buffer is reused once it is answered,
// and a burst of reviews does not make garbage of a body each. A buffer grown over
// maxPooledReview by a large review is left to the collector.
var reviewBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledReview = 64 << 10

// readReview reads a review's body into buf: JSON, at most MaxReviewBytes.
func readReview(r *http.Request, buf *bytes.Buffer) error {
	if r.Body == nil || r.Body == http.NoBody {
		return errors.New("request body is empty")
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("contentType=%s, expected application/json", ct)
	}
	if n := r.ContentLength; n > 0 && n <= MaxReviewBytes {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom reads on until it sees the end
	}
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, MaxReviewBytes+1)); err != nil {
		return fmt.Errorf("read the request body: %w", err)
	}
	if buf.Len() > MaxReviewBytes {
		return fmt.Errorf("request entity is too large; limit is %d bytes", MaxReviewBytes)
	}
	return nil
}

func allowed(warnings []string) admissionv1.AdmissionResponse {
	return admissionv1.AdmissionResponse{Allowed: true, Result: &metav1.Status{Code: http.StatusOK}, Warnings: warnings}
}

func failed(code int32, err error) admissionv1.AdmissionResponse {
	return admissionv1.AdmissionResponse{Result: &metav1.Status{Code: code, Message: err.Error()}}
}

// writeReview writes resp, for the request uid, as an admission.k8s.io/v1
// AdmissionReview.
func writeReview(w http.ResponseWriter, uid types.UID, resp admissionv1.AdmissionResponse) {
	writeReviewVia(w, new(bytes.Buffer), uid, resp)
}

// writeReviewVia is writeReview encoding into b, an empty buffer.
func writeReviewVia(w http.ResponseWriter, b *bytes.Buffer, uid types.UID, resp admissionv1.AdmissionResponse) {
	resp.UID = uid
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: &resp,
	}
	if err := json.NewEncoder(b).Encode(out); err != nil {
		http.Error(w, "encode the AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
}
