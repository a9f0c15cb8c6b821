export declare function testConfig(name: string, overrides?: Record<string, unknown>, options?: { splitFast?: string; ioIsolate?: boolean }): Record<string, unknown>;
export declare function fastFiles(packageDir: string): string[];
export declare function testedPackages(): Array<{ name: string; dir: string }>;
