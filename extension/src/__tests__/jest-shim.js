// jsdom lacks DragEvent, which @lumino/dragdrop reads when it loads.
if (typeof globalThis.DragEvent === 'undefined') {
  globalThis.DragEvent = class DragEvent extends MouseEvent {};
}
