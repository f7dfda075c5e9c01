// The resident store's columns (resident-store.ts): one typed array per field of a timer, all
// `capacity` long and addressed by slot, and the index columns other structures keep beside
// them. A growth replaces them all with wider copies (column-growth.ts), taking the columns
// made ahead for it when they are ready (../memory/columns-ahead.ts); a shrink replaces them
// with the live timers moved down (shrink.ts). Whoever reads a column reads it again after
// either. The store extends this class, so the columns are its own fields (a read is one load);
// only the store writes them, on the main thread.
//
//   slot:          0      1      2      3   …  capacity-1
//   state        [ 1    | 0    | 2    | 1  … ]     0 = free
//   fireAt       [ t0   |      | t2   | t3 … ]     f64 epoch ms
//   generation   [ 1    | 2    | 1    | 5  … ]     bumped on release
//   …one typed array per column; then the index columns (i32), one per structure that asked
//
// A slot's payload, headers, key and callbacks are one run in the arena, its ref
// (slab · 2^32 + offset) kept in two columns, offset and slab: 6 bytes instead of a float64's 8.
import { ColumnsAhead, type ColumnsAheadOptions } from '../memory/columns-ahead.ts';
import { arenaOffsetSpan } from './byte-arena.ts';
import { type ColumnMaker, ColumnMemory, widened } from './column-growth.ts';
import type { IndexColumn, IndexColumnKind, ReadonlyColumn } from './resident-layout.ts';
import { residentKeyBytesMax } from './resident-layout.ts';
import { movedColumns, movedSlotNumbers, type ShrinkPlan } from './shrink.ts';

export class ResidentColumns {
  // The store's own columns, in the order of a buffer made ahead (column-growth.ts's columnsBytes).
  protected fireAtColumn = new Float64Array(0);
  protected dueAtColumn = new Float64Array(0);
  protected logSeqColumn = new Float64Array(0);
  protected rowColumn = new Uint32Array(0);
  protected generationColumn = new Uint32Array(0);
  protected stateColumn = new Uint8Array(0);
  protected attemptsColumn = new Uint16Array(0);
  protected queueIndexColumn = new Uint16Array(0);
  protected targetIndexColumn = new Uint32Array(0);
  protected lastStatusColumn = new Uint16Array(0);
  protected bytesOffsetColumn = new Uint32Array(0);
  protected bytesSlabColumn = new Uint16Array(0);
  protected payloadLengthColumn = new Uint32Array(0);
  protected headersLengthColumn = new Uint16Array(0);
  protected keyLengthColumn = new Uint16Array(0);
  /** Slots every column holds. */
  protected columnCapacity: number;
  protected readonly indexColumns: IndexColumn[] = [];
  /** The columns of the next growth, made ahead (the store's prefaultColumnsFor). */
  protected readonly columnsAhead: ColumnsAhead;

  protected constructor(capacity: number, aheadOptions: ColumnsAheadOptions) {
    this.columnsAhead = new ColumnsAhead(aheadOptions);
    this.columnCapacity = capacity;
    this.#replace((Type) => new Type(capacity));
  }

  // The columns, read by slot. Growth replaces them, so read these again after any allocate().
  get fireAt(): ReadonlyColumn {
    return this.fireAtColumn;
  }
  get dueAt(): ReadonlyColumn {
    return this.dueAtColumn;
  }
  get logSeq(): ReadonlyColumn {
    return this.logSeqColumn;
  }
  get row(): ReadonlyColumn {
    return this.rowColumn;
  }
  get state(): ReadonlyColumn {
    return this.stateColumn;
  }
  get attempts(): ReadonlyColumn {
    return this.attemptsColumn;
  }
  get queueIndex(): ReadonlyColumn {
    return this.queueIndexColumn;
  }
  get targetIndex(): ReadonlyColumn {
    return this.targetIndexColumn;
  }
  get lastStatus(): ReadonlyColumn {
    return this.lastStatusColumn;
  }

  /** Widens every column to `capacity` slots (or more, when the columns made ahead for it are larger). */
  protected growColumns(capacity: number): void {
    // Columns made ahead for this growth or a larger one, if their pages are mapped by now.
    const ahead = this.columnsAhead.takeFor(capacity);
    const carved = ahead?.indexColumns ?? this.indexColumns.length;
    const columns = new ColumnMemory(ahead?.memory, ahead?.capacity ?? capacity, carved);
    this.#replace((Type, old) => columns.widen(Type, old));
    this.indexColumns.forEach((column, i) => {
      column.array = i < carved ? columns.widen(Int32Array, column.array) : widened(column.array, columns.capacity, (n) => new Int32Array(n));
    });
    this.columnCapacity = columns.capacity;
  }

  /** Moves the live timers to the lowest slots of columns `capacity` long as `plan` says, index columns by their kind. */
  protected shrinkColumnsTo(plan: ShrinkPlan, capacity: number): void {
    this.columnsAhead.drop();
    const moved = movedColumns(plan, capacity);
    this.#replace(moved);
    for (const column of this.indexColumns) {
      column.array = column.holds === 'bySlot' ? moved(Int32Array, column.array) : movedSlotNumbers(column.array, plan, capacity);
    }
    this.columnCapacity = capacity;
  }

  /** A new index column (zero, `capacity` long) that grows and shrinks with the columns from now on. */
  protected addIndexColumn(holds: IndexColumnKind): IndexColumn {
    // Columns made ahead before it have no room for it: the growth that takes them makes it (growColumns).
    const column: IndexColumn = { array: new Int32Array(this.columnCapacity), holds };
    this.indexColumns.push(column);
    return column;
  }

  /** Bytes of every column, index columns included. */
  protected columnsBytesUsed(): number {
    let bytes = 0;
    for (const column of this.indexColumns) bytes += column.array.byteLength;
    return (
      bytes +
      this.fireAtColumn.byteLength +
      this.dueAtColumn.byteLength +
      this.logSeqColumn.byteLength +
      this.rowColumn.byteLength +
      this.generationColumn.byteLength +
      this.stateColumn.byteLength +
      this.attemptsColumn.byteLength +
      this.queueIndexColumn.byteLength +
      this.targetIndexColumn.byteLength +
      this.lastStatusColumn.byteLength +
      this.bytesOffsetColumn.byteLength +
      this.bytesSlabColumn.byteLength +
      this.payloadLengthColumn.byteLength +
      this.headersLengthColumn.byteLength +
      this.keyLengthColumn.byteLength
    );
  }

  /** Where the slot's payload, headers, key and callbacks are in the arena, one after another. */
  bytesRefOf(slot: number): number {
    return (this.bytesSlabColumn[slot] as number) * arenaOffsetSpan + (this.bytesOffsetColumn[slot] as number);
  }

  protected setBytesRef(slot: number, ref: number): void {
    const offset = ref % arenaOffsetSpan;
    this.bytesOffsetColumn[slot] = offset;
    this.bytesSlabColumn[slot] = (ref - offset) / arenaOffsetSpan;
  }

  /** The key's bytes, without the callbacks bit. */
  keyLengthOf(slot: number): number {
    return (this.keyLengthColumn[slot] as number) & residentKeyBytesMax;
  }

  /**
   * Replaces each of the store's own columns (not the index columns) with what `make` makes of
   * it. The order is the layout of a buffer made ahead (column-growth.ts's columnsBytes).
   */
  #replace(make: ColumnMaker): void {
    this.fireAtColumn = make(Float64Array, this.fireAtColumn);
    this.dueAtColumn = make(Float64Array, this.dueAtColumn);
    this.logSeqColumn = make(Float64Array, this.logSeqColumn);
    this.rowColumn = make(Uint32Array, this.rowColumn);
    this.generationColumn = make(Uint32Array, this.generationColumn);
    this.stateColumn = make(Uint8Array, this.stateColumn);
    this.attemptsColumn = make(Uint16Array, this.attemptsColumn);
    this.queueIndexColumn = make(Uint16Array, this.queueIndexColumn);
    this.targetIndexColumn = make(Uint32Array, this.targetIndexColumn);
    this.lastStatusColumn = make(Uint16Array, this.lastStatusColumn);
    this.bytesOffsetColumn = make(Uint32Array, this.bytesOffsetColumn);
    this.bytesSlabColumn = make(Uint16Array, this.bytesSlabColumn);
    this.payloadLengthColumn = make(Uint32Array, this.payloadLengthColumn);
    this.headersLengthColumn = make(Uint16Array, this.headersLengthColumn);
    this.keyLengthColumn = make(Uint16Array, this.keyLengthColumn);
  }
}
