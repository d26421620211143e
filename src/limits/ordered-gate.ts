/**
 * Keeps a WebSocket's caller messages in order while one of them (a response.create) waits for an
 * admission that goes through Redis: the messages after it wait too, and pass in order once it is decided.
 */
export class OrderedGate<T> {
  private readonly queue: [Buffer, boolean][] = [];
  private busy = false;
  private closed = false;

  constructor(
    /** The hook every caller message goes through: true to send it upstream. */
    private readonly pass: (data: Buffer, isBinary: boolean) => boolean,
    private readonly send: (data: Buffer, isBinary: boolean) => void,
  ) {}

  get waiting(): boolean {
    return this.busy;
  }

  /** A message that arrived while an admission is pending: it goes through `pass` after it. */
  defer(data: Buffer, isBinary: boolean): false {
    this.queue.push([data, isBinary]);
    return false;
  }

  /**
   * Holds `data` until `admission` settles, then sends it if `decide` says so, and lets the deferred
   * messages through. If the socket closed meanwhile, `dropped` gets the admission (to release its hold).
   */
  wait(admission: Promise<T>, data: Buffer, decide: (v: T) => boolean, dropped: (v: T) => void): false {
    this.busy = true;
    void admission.then((v) => {
      this.busy = false;
      if (this.closed) return dropped(v);
      if (decide(v)) this.send(data, false);
      while (!this.busy && !this.closed && this.queue.length > 0) {
        const [d, b] = this.queue.shift()!;
        if (this.pass(d, b)) this.send(d, b);
      }
    });
    return false;
  }

  close(): void {
    this.closed = true;
    this.queue.length = 0;
  }
}
