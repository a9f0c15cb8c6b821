export declare function testConfig(name: string, overrides?: Record<string, unknown>): Record<string, unknown>;
