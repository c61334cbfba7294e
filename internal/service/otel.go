package service

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// NewTracerProvider returns the tracer provider htq serve exports its
// spans with, as OpenTelemetry's standard environment variables of the
// process say, or nil when they ask for no export (the service then makes
// no spans: Config.TracerProvider stays nil):
//
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
//     turns export on; without either there is none.
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none, turns it off;
//     OTEL_TRACES_EXPORTER may otherwise only be otlp (the default).
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
//     chooses http/protobuf (the default) or grpc.
//   - The exporter reads the rest of OTEL_EXPORTER_OTLP_* (headers,
//     timeout, compression, certificates, insecure), the SDK
//     OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_* and
//     OTEL_SPAN_*_LIMIT, the resource OTEL_SERVICE_NAME (default "htq") and
//     OTEL_RESOURCE_ATTRIBUTES.
//
// Spans are exported in batches; call Shutdown on the provider after the
// service has stopped to send the last ones. A bad setting is an error
// wrapping ErrInvalidConfig that names the variable.
func NewTracerProvider(ctx context.Context, version string) (*sdktrace.TracerProvider, error) {
	env := func(k string) string { return strings.TrimSpace(os.Getenv(k)) }
	either := func(specific, general string) (string, string) {
		if v := env(specific); v != "" {
			return specific, v
		}
		return general, env(general)
	}
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	switch exp := env("OTEL_TRACES_EXPORTER"); exp {
	case "", "otlp":
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: htq serve exports with otlp (or none)", ErrInvalidConfig, exp)
	}
	if _, endpoint := either("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"); endpoint == "" {
		return nil, nil
	}
	var exporter sdktrace.SpanExporter
	var err error
	switch name, protocol := either("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); protocol {
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w: %s=%q: want http/protobuf or grpc", ErrInvalidConfig, name, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("service: OTLP trace exporter: %w", err)
	}
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName("htq"))}
	if version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(version)))
	}
	// The environment's attributes come last and win.
	res, err := resource.New(ctx, append(attrs, resource.WithTelemetrySDK(), resource.WithFromEnv())...)
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w", ErrInvalidConfig, err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), nil
}
