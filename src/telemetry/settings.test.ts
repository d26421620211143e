import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config.js';

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' };

describe('OpenTelemetry settings from the standard variables', () => {
  it('is off unless an endpoint is set, or when the SDK is disabled', () => {
    expect(loadConfig({}).telemetry).toBeNull();
    expect(loadConfig({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_HEADERS: 'a=b' }).telemetry).toBeNull();
    expect(loadConfig({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }).telemetry).toBeNull();
  });

  it('derives each signal’s URL from the base endpoint, a signal’s own variable as given', () => {
    expect(loadConfig(ENDPOINT).telemetry).toMatchObject({
      tracesUrl: 'http://collector:4318/v1/traces',
      metricsUrl: 'http://collector:4318/v1/metrics',
      protocol: 'http/protobuf',
      serviceName: 'keyrelay',
      spanDelayMs: 5000,
      metricIntervalMs: 60000,
      exportTimeoutMs: 10000,
    });
    const tracesOnly = loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://x.example/otlp/spans' });
    expect(tracesOnly.telemetry).toMatchObject({
      tracesUrl: 'https://x.example/otlp/spans',
      metricsUrl: null,
    });
  });

  it('reads headers and resource attributes as percent-encoded name=value lists', () => {
    const t = loadConfig({
      ...ENDPOINT,
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc%3D%3D , x-honeycomb-team=k=v',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attrs,deployment.environment.name=prod',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    }).telemetry!;
    expect(t.headers).toEqual({ authorization: 'Bearer abc==', 'x-honeycomb-team': 'k=v' });
    expect(t.resourceAttributes).toEqual({
      'service.name': 'from-attrs',
      'deployment.environment.name': 'prod',
    });
    expect(t.serviceName).toBe('from-attrs');
    expect(t.protocol).toBe('http/json');
    expect(
      loadConfig({ ...ENDPOINT, OTEL_SERVICE_NAME: 'gw', OTEL_RESOURCE_ATTRIBUTES: 'service.name=x' })
        .telemetry!.serviceName,
    ).toBe('gw');
  });

  it.each([
    ['OTEL_EXPORTER_OTLP_HEADERS', 'authorization', 'entry 1 is not name=value'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'a=b,,c=d', 'entry 2 is not name=value'],
    ['OTEL_EXPORTER_OTLP_HEADERS', '=token', 'entry 1 is not name=value'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'bad name=x', 'not a valid header name'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'x=%E0%A4%A', 'malformed percent-encoding'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'x=a%0D%0Ainjected: 1', 'characters a header cannot carry'],
    ['OTEL_RESOURCE_ATTRIBUTES', 'env', 'entry 1 is not name=value'],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc', 'use http/protobuf or http/json'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318', 'must be an http(s) URL'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'not a url', 'is not a URL'],
    ['OTEL_BSP_SCHEDULE_DELAY', 'soon', 'not a whole number of milliseconds'],
  ])('refuses %s=%s with a message naming it', (name, value, says) => {
    const env = { ...ENDPOINT, [name]: value };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(`${name}: `);
    expect(() => loadConfig(env)).toThrow(says);
  });
});
