// s3rver ships no types: the part of its API the S3 stand-in uses.
declare module 's3rver' {
  interface S3rverOptions {
    address?: string;
    port?: number;
    directory: string;
    silent?: boolean;
    configureBuckets?: { name: string }[];
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    run(): Promise<unknown>;
    /** The http.Server run() listens with. */
    httpServer: unknown;
    close(): Promise<unknown>;
  }
}
