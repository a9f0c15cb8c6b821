import { describe, expect, it } from 'vitest';
import { normalizeRegistryHost, registryHostOf } from '../src/registry-host.js';

describe('registry hosts', () => {
  it('reads the host of an image as Docker does', () => {
    expect(registryHostOf('nginx')).toBe('docker.io');
    expect(registryHostOf('nginx:1.25')).toBe('docker.io');
    expect(registryHostOf('library/nginx')).toBe('docker.io');
    expect(registryHostOf('acme/app:1')).toBe('docker.io');
    expect(registryHostOf('index.docker.io/acme/app')).toBe('docker.io');
    expect(registryHostOf('registry-1.docker.io/acme/app')).toBe('docker.io');
    expect(registryHostOf('ghcr.io/acme/app:2')).toBe('ghcr.io');
    expect(registryHostOf('Registry.Example.com:5000/acme/app')).toBe('registry.example.com:5000');
    expect(registryHostOf('127.0.0.1:5443/team-a/app:1')).toBe('127.0.0.1:5443');
    expect(registryHostOf('localhost/app')).toBe('localhost');
  });

  it('normalises a host as given to the API: aliases, case, scheme; the port stays', () => {
    expect(normalizeRegistryHost('Docker.IO')).toBe('docker.io');
    expect(normalizeRegistryHost('index.docker.io')).toBe('docker.io');
    expect(normalizeRegistryHost('https://registry-1.docker.io/v2/')).toBe('docker.io');
    expect(normalizeRegistryHost('REGISTRY.example.com:5000')).toBe('registry.example.com:5000');
    expect(normalizeRegistryHost('registry.example.com:443')).toBe('registry.example.com:443');
    expect(normalizeRegistryHost('docker.io:443')).toBe('docker.io:443');
  });
});
