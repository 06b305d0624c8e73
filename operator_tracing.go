package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// operatorTracing are the --tracing-* flags of `ferrofed operator`: the operator's own
// spans, one per reconcile of a Gateway (docs/tracing.md, "The operator's own spans"),
// exported over OTLP/HTTP with the gateway's exporter (tracing.OTLP: the headers file
// read at each export, the CA file, one try per export).
type operatorTracing struct {
	endpoint    string
	ratio       float64
	timeout     time.Duration
	headersFile string
	caFile      string
	serviceName string
}

// Bounds of the operator's exporter: its queue (spans beyond it are dropped, not
// held) and the flush at shutdown.
const (
	operatorTracingQueue        = 2048
	operatorTracingBatch        = 256
	operatorTracingShutdownWait = 5 * time.Second
	defaultOperatorServiceName  = "ferrofed-operator"
)

// table is the flags as a [tracing] table, for the gateway's exporter.
func (o operatorTracing) table() *config.Tracing {
	ms := o.timeout.Milliseconds()
	return &config.Tracing{Endpoint: o.endpoint, SamplingRatio: &o.ratio, TimeoutMS: &ms,
		HeadersFile: o.headersFile, CAFile: o.caFile, ServiceName: o.serviceName}
}

// validate names the flag of each problem.
func (o operatorTracing) validate() error {
	var errs []error
	u, err := url.Parse(o.endpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, errors.New("--tracing-endpoint must be an absolute http or https URL"))
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, errors.New("--tracing-endpoint must not carry credentials, a query or a fragment (a token goes in --tracing-headers-file)"))
	case strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), config.TracingPath):
		errs = append(errs, fmt.Errorf("--tracing-endpoint is the base URL: %s is appended to it", config.TracingPath))
	}
	if o.ratio < 0 || o.ratio > 1 || o.ratio != o.ratio {
		errs = append(errs, errors.New("--tracing-sampling-ratio must be from 0 to 1"))
	}
	if o.timeout <= 0 || o.timeout > time.Duration(config.MaxTracingTimeoutMS)*time.Millisecond {
		errs = append(errs, fmt.Errorf("--tracing-timeout must be greater than 0 and at most %dms", config.MaxTracingTimeoutMS))
	}
	if o.caFile != "" && !strings.HasPrefix(o.endpoint, "https:") {
		errs = append(errs, errors.New("--tracing-ca-file needs an https --tracing-endpoint"))
	}
	if o.headersFile != "" {
		if _, err := config.ReadTracingHeaders("--tracing-headers-file", o.headersFile); err != nil {
			errs = append(errs, err)
		}
	}
	if strings.TrimSpace(o.serviceName) == "" || len(o.serviceName) > config.MaxTracingServiceNameBytes {
		errs = append(errs, fmt.Errorf("--tracing-service-name must be 1 to %d bytes", config.MaxTracingServiceNameBytes))
	}
	return errors.Join(errs...)
}

// provider builds the operator's tracer provider, or returns nil when
// --tracing-endpoint is empty; shutdown flushes what is queued, bounded by
// operatorTracingShutdownWait.
func (o operatorTracing) provider(log logr.Logger) (*sdktrace.TracerProvider, func(), error) {
	if o.endpoint == "" {
		return nil, func() {}, nil
	}
	if err := o.validate(); err != nil {
		return nil, nil, err
	}
	exp, err := tracing.OTLP(o.table())
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	kvs := []attribute.KeyValue{attribute.String("service.name", o.serviceName)}
	for env, key := range map[string]string{config.EnvPodName: "k8s.pod.name", config.EnvPodNamespace: "k8s.namespace.name"} {
		if v := os.Getenv(env); v != "" && len(v) <= 253 {
			kvs = append(kvs, attribute.String(key, v))
		}
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.ratio))),
		sdktrace.WithResource(resource.NewSchemaless(kvs...)),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(operatorTracingQueue), sdktrace.WithMaxExportBatchSize(operatorTracingBatch),
			sdktrace.WithExportTimeout(o.timeout)),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeValueLengthLimit: 256, AttributeCountLimit: 16, EventCountLimit: 8}))
	log.Info("Tracing the operator's reconciles", "endpoint", o.endpoint, "samplingRatio", o.ratio)
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), operatorTracingShutdownWait)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Error(err, "Could not push the operator's last spans before exit")
		}
	}
	return tp, shutdown, nil
}
