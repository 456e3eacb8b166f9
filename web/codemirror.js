// What the editor page (groupcomm/web/static/edit.js) takes from CodeMirror 6: bundled by
// esbuild into groupcomm/web/static/codemirror.js, one ES module the page imports.
export {
  Annotation, ChangeSet, EditorSelection, EditorState, StateEffect, StateField, Transaction,
  RangeSetBuilder, findClusterBreak,
} from "@codemirror/state";
export {
  Decoration, EditorView, WidgetType, drawSelection, keymap, lineNumbers, highlightSpecialChars,
  highlightActiveLine, ViewPlugin,
} from "@codemirror/view";
export {
  defaultKeymap, deleteCharBackward, deleteCharForward, selectAll,
} from "@codemirror/commands";
