/* Self-check questions of every chapter, read by quiz.js (see README.md in this folder).
 *
 * The value after "window.BOOK_QUIZZES =" is plain JSON (tests/test_quizzes.py parses it with
 * json.loads), keyed by the chapter's file name without suffix; a chapter shows its questions
 * where it has <div class="book-quiz" data-quiz="KEY"></div>.
 * A question is either
 *   {"type": "choice", "question": ..., "options": [{"text", "correct", "explanation"}, ...]}
 *   with exactly one correct option and an explanation for every option, or
 *   {"type": "numeric", "question": ..., "answer": number, "tolerance": number (optional),
 *    "answer_text": shown by "Show the answer" (optional), "unit" (optional),
 *    "explanation": for the right answer, "hint": for a wrong one,
 *    "mistakes": [{"value", "explanation"}, ...] common wrong answers with their own reasons}.
 * Strings may hold <i>, <sub>, <sup>, <code>, <b>, <em> and no TeX: the questions are built after
 * MathJax has typeset the page. Numbers must follow from the chapter's maths.
 * The page shows a question's options in an order drawn from the question's text (displayOrder in
 * quiz.js, display_order in transformer_intro.exercises.quiz), not in the stored order. In every
 * chapter the right options must land at spread positions and be the longest option in at most
 * half of the questions; tests/test_quizzes.py checks both and says which stored slot to use.
 * Every wrong option is a misconception its explanation names.
 * The same questions run in Jupyter: transformer_intro.exercises.quiz.quiz("NN_name").
 */
window.BOOK_QUIZZES = {
 "01_tokens": [
  {
   "type": "choice",
   "question": "The maths writes a sequence as <i>X</i> ∈ ℝ<sup><i>D</i> × <i>N</i></sup>, one token per column. What does the code's array <code>x</code> hold?",
   "options": [
    {
     "text": "<i>X</i> itself, a <code>(D, N)</code> array, one token per column",
     "correct": false,
     "explanation": "That is the maths' layout. The package, like almost every deep learning library, puts tokens in rows, so <code>x</code> is the transpose of <i>X</i>."
    },
    {
     "text": "<i>X</i> reshaped to <code>(N, D)</code>, one token per row",
     "correct": false,
     "explanation": "A reshape would cut the columns of <i>X</i> into pieces and mix features of different tokens; the relation between the two is a transpose, not a reshape."
    },
    {
     "text": "A <code>(B, N, D)</code> batch, even for a single sequence",
     "correct": false,
     "explanation": "Every module of the package acts on one sequence, an <code>(N, D)</code> array; batches are handled with <code>jax.vmap</code> or the modules' <code>batched</code> methods."
    },
    {
     "text": "<i>X</i><sup>⊤</sup>: an <code>(N, D)</code> array, one token per row",
     "correct": true,
     "explanation": "The code follows JAX and Equinox, which put tokens in rows: <code>x</code> has shape <code>(N, D)</code> and <code>X = x.T</code>."
    }
   ]
  },
  {
   "type": "choice",
   "question": "The maths mixes tokens by a product on the right, <i>Y</i> = <i>X</i> <i>A</i>, with an <i>N</i> × <i>N</i> matrix <i>A</i>. Which line computes the code's <code>y</code> (tokens as rows)?",
   "options": [
    {
     "text": "<code>y = x @ A</code>",
     "correct": false,
     "explanation": "<code>x</code> has shape <code>(N, D)</code> and <code>A</code> is <code>(N, N)</code>: the shapes do not even fit unless <i>D</i> = <i>N</i>, and then the product would mix the features of each token, not the tokens."
    },
    {
     "text": "<code>y = A @ x</code>",
     "correct": false,
     "explanation": "This uses row <i>n</i> of <i>A</i> for output <i>n</i>, that is the weights <i>A</i><sub><i>n</i>,<i>n</i>′</sub>: it swaps the roles of input and output. The transpose is needed."
    },
    {
     "text": "<code>y = A.T @ x</code>",
     "correct": true,
     "explanation": "Transposing <i>Y</i> = <i>X</i><i>A</i> gives <i>Y</i><sup>⊤</sup> = <i>A</i><sup>⊤</sup> <i>X</i><sup>⊤</sup>, and <code>x</code> holds <i>X</i><sup>⊤</sup>: a product on the right in the maths is a product on the left, by the transpose, in the code."
    },
    {
     "text": "<code>y = x.T @ A</code>",
     "correct": false,
     "explanation": "<code>x.T @ A</code> is <i>X</i><i>A</i> = <i>Y</i> in the maths' layout, a <code>(D, N)</code> array with tokens as columns. The code wants its transpose, the <code>(N, D)</code> array of rows."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "An RGB image of 64 × 64 pixels is cut into patches of side <i>P</i> = 4, each flattened into one token. What is the token width <i>D</i> of a raw (unprojected) patch?",
   "answer": 48,
   "explanation": "Each patch holds <i>P</i><sup>2</sup> = 16 pixels of 3 channels, so <i>D</i> = 3<i>P</i><sup>2</sup> = 48 numbers. (There are <i>N</i> = (64/4)<sup>2</sup> = 256 such tokens.)",
   "hint": "Count the numbers in one patch: <i>P</i> × <i>P</i> pixels, each with a red, a green and a blue value.",
   "mistakes": [
    {
     "value": 16,
     "explanation": "<i>P</i><sup>2</sup> = 16 counts the pixels of a patch once; each pixel has three channels, so <i>D</i> = 3<i>P</i><sup>2</sup>."
    },
    {
     "value": 12,
     "explanation": "3<i>P</i> = 12: the patch is <i>P</i> × <i>P</i> pixels, so the count is 3<i>P</i><sup>2</sup>, not 3<i>P</i>."
    },
    {
     "value": 256,
     "explanation": "256 is the number of patches, <i>N</i> = (64/<i>P</i>)<sup>2</sup>, not the width of each one."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Inside one transformer block, what do the two stages do?",
   "options": [
    {
     "text": "Attention transforms each token on its own; the MLP then mixes information across the tokens",
     "correct": false,
     "explanation": "The roles are swapped: attention is the stage that mixes across tokens, and the MLP acts within each token."
    },
    {
     "text": "Both mix information across tokens: attention through its weights, the MLP through its hidden layer",
     "correct": false,
     "explanation": "Only attention does. The MLP's influence of input <i>n</i>′ on output <i>n</i> is zero for every <i>n</i>′ ≠ <i>n</i>."
    },
    {
     "text": "Attention mixes the tokens; the MLP transforms each token with its own network, one per position",
     "correct": false,
     "explanation": "One MLP, with the same parameters, is applied to every token of the block; that is what keeps the block indifferent to the order of the tokens."
    },
    {
     "text": "Attention mixes the tokens; the MLP transforms each token alone, with one network for all",
     "correct": true,
     "explanation": "Every output of attention is computed from all inputs, while the MLP's output <i>n</i> depends on token <i>n</i> alone: the influence figure of the chapter is full for attention and diagonal for the MLP."
    }
   ]
  },
  {
   "type": "choice",
   "question": "You shuffle the input tokens of a transformer block. What happens to its output?",
   "options": [
    {
     "text": "Nothing changes: the same outputs, in the same order",
     "correct": false,
     "explanation": "That would be invariance. The block returns one output per token, and the outputs move with their tokens."
    },
    {
     "text": "Attention's outputs change, since its weights depend on where each token sits",
     "correct": false,
     "explanation": "Attention's weights depend on the tokens' contents, not on their positions: the weights move with the tokens, and so do the outputs."
    },
    {
     "text": "The MLP's outputs follow their tokens, but attention's outputs change",
     "correct": false,
     "explanation": "Neither stage uses positions. The MLP acts on each token alone, and attention treats its inputs as a set."
    },
    {
     "text": "The outputs are shuffled in the same way",
     "correct": true,
     "explanation": "Nothing in the block looks at where a token sits, so the block is permutation equivariant: each output follows its token."
    }
   ]
  }
 ],
 "02_attention": [
  {
   "type": "choice",
   "question": "What does column <i>n</i> of the attention matrix <i>A</i> hold?",
   "options": [
    {
     "text": "The weights input <i>n</i> sends to the outputs; they sum to one",
     "correct": false,
     "explanation": "That is row <i>n</i> of <i>A</i>, and rows need not sum to one. The first index is the input, the second the output."
    },
    {
     "text": "The weights output <i>n</i> puts on the inputs; they sum to one",
     "correct": true,
     "explanation": "<i>y</i><sub><i>n</i></sub> = Σ<sub><i>n</i>′</sub> <i>x</i><sub><i>n</i>′</sub> <i>A</i><sub><i>n</i>′,<i>n</i></sub>, so column <i>n</i> spreads output <i>n</i>'s attention, a total of one, over the inputs."
    },
    {
     "text": "The scores <i>S</i><sub><i>n</i>′,<i>n</i></sub> of output <i>n</i>, before the softmax",
     "correct": false,
     "explanation": "The scores can be any real numbers; <i>A</i> is their softmax, taken down each column."
    },
    {
     "text": "The weights of output <i>n</i>, which need not sum to one; the rows of <i>A</i> do",
     "correct": false,
     "explanation": "It is the other way round: each column of <i>A</i> sums to one. JAX's row-stochastic weight matrix is <i>A</i><sup>⊤</sup>, whose row <i>n</i> is column <i>n</i> of the book's <i>A</i>."
    }
   ]
  },
  {
   "type": "choice",
   "question": "With a shared projection, the scores are symmetric: <i>S</i><sub><i>n</i>′,<i>n</i></sub> = <i>S</i><sub><i>n</i>,<i>n</i>′</sub>. What does that force on the attention matrix <i>A</i>?",
   "options": [
    {
     "text": "<i>A</i> is symmetric, <i>A</i><sub><i>n</i>′,<i>n</i></sub> = <i>A</i><sub><i>n</i>,<i>n</i>′</sub>, since the softmax keeps the scores' symmetry",
     "correct": false,
     "explanation": "This is Turner's conclusion, which the chapter corrects: different columns have different normalisers <i>ζ</i><sub><i>n</i></sub>, so <i>A</i> is symmetric only in the special case of equal <i>ζ</i><sub><i>n</i></sub>."
    },
    {
     "text": "No constraint at all: the normalisers <i>ζ</i><sub><i>n</i></sub> remove the symmetry entirely",
     "correct": false,
     "explanation": "A constraint remains: around any cycle of three tokens, <i>A</i><sub>1,2</sub> <i>A</i><sub>2,3</sub> <i>A</i><sub>3,1</sub> = <i>A</i><sub>2,1</sub> <i>A</i><sub>3,2</sub> <i>A</i><sub>1,3</sub>. Only separate keys and queries remove it."
    },
    {
     "text": "<i>A</i> is symmetric exactly when the projection is square, <i>K</i> = <i>D</i>",
     "correct": false,
     "explanation": "The width of the projection does not decide it; equal normalisers <i>ζ</i><sub><i>n</i></sub> do, and they can occur for any <i>K</i> (the chapter's first exercise builds them with <i>K</i> = 2)."
    },
    {
     "text": "Detailed balance, <i>A</i><sub><i>n</i>′,<i>n</i></sub> <i>ζ</i><sub><i>n</i></sub> = <i>A</i><sub><i>n</i>,<i>n</i>′</sub> <i>ζ</i><sub><i>n</i>′</sub>; symmetric only for equal <i>ζ</i><sub><i>n</i></sub>",
     "correct": true,
     "explanation": "The softmax divides each column by its own normaliser <i>ζ</i><sub><i>n</i></sub>, so the symmetry of <i>S</i> survives only up to those factors."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "Keys and queries have <i>K</i> = 64 independent entries, each with mean zero and variance one. What is the standard deviation of the unscaled score <i>k</i><sup>⊤</sup> <i>q</i>?",
   "answer": 8,
   "explanation": "<i>k</i><sup>⊤</sup> <i>q</i> is a sum of <i>K</i> independent products of variance one, so its variance is <i>K</i> = 64 and its standard deviation √<i>K</i> = 8. Dividing by √<i>K</i> brings it back to one.",
   "hint": "Each of the <i>K</i> products <i>k</i><sub><i>i</i></sub> <i>q</i><sub><i>i</i></sub> has variance one; variances of independent terms add.",
   "mistakes": [
    {
     "value": 64,
     "explanation": "64 is the variance, <i>K</i>. The standard deviation is its square root."
    },
    {
     "value": 1,
     "explanation": "One is the standard deviation after dividing the score by √<i>K</i>; the question asks for the unscaled score."
    },
    {
     "value": 0.125,
     "explanation": "1/√<i>K</i> is the scaling factor, not the spread of the score."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why do implementations divide the scores by √<i>K</i>?",
   "options": [
    {
     "text": "It lets the layer express functions it could not express otherwise",
     "correct": false,
     "explanation": "Scaling costs and adds no expressive power: dividing the scores by √<i>K</i> is the same as dividing <i>U</i><sub><i>q</i></sub> by √<i>K</i>, which training could learn anyway."
    },
    {
     "text": "To keep the scores' spread at one for any <i>K</i>, so softmax does not saturate",
     "correct": true,
     "explanation": "Unscaled scores have variance <i>K</i>. Wide heads then give near one-hot columns, where the softmax derivative diag(<i>a</i>) − <i>a</i> <i>a</i><sup>⊤</sup> is close to zero."
    },
    {
     "text": "It makes every column of <i>A</i> sum to one, as a distribution must",
     "correct": false,
     "explanation": "The softmax already makes each column sum to one, scaled or not."
    },
    {
     "text": "It keeps exp from overflowing in float32 when <i>K</i> is large",
     "correct": false,
     "explanation": "Overflow is prevented by subtracting each column's largest score before exponentiating, which <code>jax.nn.softmax</code> does; the scaling addresses learning, not overflow."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In the book's orientation (rows <i>n</i>′ are inputs, columns <i>n</i> outputs), where does <code>causal_mask(N)</code> allow attention?",
   "options": [
    {
     "text": "On and below the diagonal, the lower triangle",
     "correct": false,
     "explanation": "That is how libraries that put queries in rows draw the same mask. With inputs as rows, <i>n</i>′ ≤ <i>n</i> is the upper triangle."
    },
    {
     "text": "Where <i>n</i>′ ≥ <i>n</i>: each output reads itself and the inputs after it",
     "correct": false,
     "explanation": "That would let every output read the inputs after it, exactly what a causal mask exists to forbid."
    },
    {
     "text": "On and above the diagonal: <i>n</i>′ ≤ <i>n</i>, the upper triangle",
     "correct": true,
     "explanation": "Output <i>n</i> may read only the inputs up to its own position, so the allowed entries <i>A</i><sub><i>n</i>′,<i>n</i></sub> have <i>n</i>′ ≤ <i>n</i>."
    },
    {
     "text": "Everywhere, but forbidden weights are set to zero after the softmax",
     "correct": false,
     "explanation": "The forbidden scores are set to −∞ before the softmax, so their weights are exactly zero and each column is renormalised over the allowed inputs."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Causal and padding masks are combined, and the first token is padding. What does column 1 of <i>A</i> (the first output) become?",
   "options": [
    {
     "text": "Uniform weights over all tokens",
     "correct": false,
     "explanation": "The masks still apply: no input is allowed in this column, so there is nothing to spread the weight over."
    },
    {
     "text": "Weight one on itself, the only token it may read",
     "correct": false,
     "explanation": "Only after the fix <code>mask | jnp.eye(N, dtype=bool)</code>; the combined mask alone forbids the diagonal entry too, because token 1 is padding."
    },
    {
     "text": "A column of zeros, since every input is forbidden",
     "correct": false,
     "explanation": "The softmax divides by the sum of the allowed exponentials, which is zero here: the result is 0/0, <code>nan</code>, not zero."
    },
    {
     "text": "<code>nan</code>: the column allows no input at all",
     "correct": true,
     "explanation": "Its only earlier input is padding, so every score in it is −∞, and a softmax of nothing but −∞ is 0/0. A fix lets every output attend to itself."
    }
   ]
  }
 ],
 "03_multi_head_attention": [
  {
   "type": "choice",
   "question": "A sequence holds a single token, <i>N</i> = 1. What does multi-head self-attention compute from it?",
   "options": [
    {
     "text": "Zero: with one token the softmax has nothing to spread its weight over",
     "correct": false,
     "explanation": "A softmax over one entry gives weight one, not zero, so each head passes <i>V</i><sub><i>h</i></sub> <i>x</i><sub>1</sub> on."
    },
    {
     "text": "The linear map <i>y</i><sub>1</sub> = (Σ<sub><i>h</i></sub> <i>V</i><sub><i>h</i></sub>) <i>x</i><sub>1</sub>",
     "correct": true,
     "explanation": "With one token every <i>A</i><sub><i>h</i></sub> is the 1 × 1 matrix [1], so Σ<sub><i>h</i></sub> <i>V</i><sub><i>h</i></sub> <i>X</i> <i>A</i><sub><i>h</i></sub> collapses to a linear map: MHSA's nonlinearity lives only in how tokens relate."
    },
    {
     "text": "A nonlinear function of <i>x</i><sub>1</sub>, through the softmax",
     "correct": false,
     "explanation": "The softmax of a single score is one whatever the score, so <i>x</i><sub>1</sub> does not enter through the weights at all."
    },
    {
     "text": "<i>x</i><sub>1</sub> itself, since it attends only to itself",
     "correct": false,
     "explanation": "Only if Σ<sub><i>h</i></sub> <i>V</i><sub><i>h</i></sub> happens to be the identity; in general the value maps change the token."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "Turner's layer has full <i>D</i> × <i>D</i> value maps <i>V</i><sub><i>h</i></sub> and key width <i>K</i> = <i>D</i>/<i>H</i>. How many parameters does it have for <i>D</i> = 128 and <i>H</i> = 8?",
   "answer": 163840,
   "answer_text": "163,840",
   "explanation": "Keys and queries cost 2<i>H</i><i>K</i><i>D</i> = 2<i>D</i><sup>2</sup> and the value maps <i>H</i><i>D</i><sup>2</sup>, so (2 + <i>H</i>) <i>D</i><sup>2</sup> = 10 · 16,384 = 163,840.",
   "hint": "Add 2<i>H</i><i>K</i><i>D</i> for the key and query projections to <i>H</i> <i>D</i><sup>2</sup> for the value maps.",
   "mistakes": [
    {
     "value": 65536,
     "explanation": "4<i>D</i><sup>2</sup> = 65,536 is the usual factored layer with <i>D</i><sub><i>v</i></sub> = <i>D</i>/<i>H</i>, not Turner's full value maps."
    },
    {
     "value": 131072,
     "explanation": "<i>H</i><i>D</i><sup>2</sup> counts the value maps only; the keys and queries add 2<i>H</i><i>K</i><i>D</i> = 2<i>D</i><sup>2</sup>."
    },
    {
     "value": 393216,
     "explanation": "3<i>H</i><i>D</i><sup>2</sup> is the reference's layout with <i>K</i> = <i>D</i>; with <i>K</i> = <i>D</i>/<i>H</i> the keys and queries cost only 2<i>D</i><sup>2</sup>."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In the usual form, head <i>h</i>'s value map is factored as <i>V</i><sub><i>h</i></sub> = <i>O</i><sub><i>h</i></sub> <i>W</i><sub><i>h</i></sub> with <i>W</i><sub><i>h</i></sub> ∈ ℝ<sup><i>D</i><sub><i>v</i></sub> × <i>D</i></sup>. What is its rank?",
   "options": [
    {
     "text": "<i>D</i>, since <i>V</i><sub><i>h</i></sub> is a <i>D</i> × <i>D</i> matrix",
     "correct": false,
     "explanation": "The shape is <i>D</i> × <i>D</i>, but the product passes through <i>D</i><sub><i>v</i></sub> dimensions: only when <i>D</i><sub><i>v</i></sub> = <i>D</i> and both factors are invertible is the rank <i>D</i>."
    },
    {
     "text": "At most <i>D</i><sub><i>v</i></sub>",
     "correct": true,
     "explanation": "<i>V</i><sub><i>h</i></sub> is a <i>D</i> × <i>D</i><sub><i>v</i></sub> matrix times a <i>D</i><sub><i>v</i></sub> × <i>D</i> one, so it passes through <i>D</i><sub><i>v</i></sub> dimensions: its rank cannot exceed <i>D</i><sub><i>v</i></sub>."
    },
    {
     "text": "At most <i>K</i>",
     "correct": false,
     "explanation": "<i>K</i> is the key and query width; it does not enter <i>V</i><sub><i>h</i></sub> at all."
    },
    {
     "text": "At most <i>D</i>/<i>H</i>, whatever <i>D</i><sub><i>v</i></sub> is",
     "correct": false,
     "explanation": "<i>D</i>/<i>H</i> is the usual choice of <i>D</i><sub><i>v</i></sub>, not a limit in itself: the bound is <i>D</i><sub><i>v</i></sub>, whatever value it is given."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Shuffling the tokens, <i>X</i> ↦ <i>X</i>Π, changes head <i>h</i>'s attention matrix to which of these?",
   "options": [
    {
     "text": "<i>A</i><sub><i>h</i></sub>(<i>X</i>), unchanged",
     "correct": false,
     "explanation": "The weights belong to pairs of tokens, and the tokens have moved: the same weights reappear at relabelled rows and columns."
    },
    {
     "text": "<i>A</i><sub><i>h</i></sub>(<i>X</i>)  Π",
     "correct": false,
     "explanation": "That moves only the columns (the outputs). The inputs are shuffled too, so the rows move as well."
    },
    {
     "text": "Π <i>A</i><sub><i>h</i></sub>(<i>X</i>)  Π<sup>⊤</sup>",
     "correct": false,
     "explanation": "This relabels by the inverse permutation. The scores of <i>X</i>Π are (<i>X</i>Π)<sup>⊤</sup> <i>U</i><sub><i>k</i></sub><sup>⊤</sup> <i>U</i><sub><i>q</i></sub> <i>X</i> Π, with Π<sup>⊤</sup> on the left."
    },
    {
     "text": "Π<sup>⊤</sup> <i>A</i><sub><i>h</i></sub>(<i>X</i>)  Π",
     "correct": true,
     "explanation": "Keys and queries are shuffled alike, so the scores become Π<sup>⊤</sup> <i>S</i> Π, and normalising columns commutes with that relabelling: rows and columns move together."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In the usual row form, softmax(<i>Q</i><sub><i>h</i></sub> <i>K</i><sub><i>h</i></sub><sup>⊤</sup>) is taken along rows. How is it related to head <i>h</i>'s attention matrix <i>A</i><sub><i>h</i></sub> (leaving out √<i>K</i>)?",
   "options": [
    {
     "text": "It is <i>A</i><sub><i>h</i></sub> itself",
     "correct": false,
     "explanation": "In the row form the rows are the outputs; in the book's <i>A</i><sub><i>h</i></sub> the columns are. The two are transposes."
    },
    {
     "text": "It is an unrelated matrix: the usual form is a different layer",
     "correct": false,
     "explanation": "The two forms are the same layer, with the dictionary <i>U</i><sub><i>q</i>,<i>h</i></sub> = <i>W</i><sub><i>Q</i>,<i>h</i></sub><sup>⊤</sup>, <i>U</i><sub><i>k</i>,<i>h</i></sub> = <i>W</i><sub><i>K</i>,<i>h</i></sub><sup>⊤</sup>, <i>V</i><sub><i>h</i></sub> = <i>O</i><sub><i>h</i></sub> <i>W</i><sub><i>h</i></sub>."
    },
    {
     "text": "It is <i>A</i><sub><i>h</i></sub> with each entry divided by <i>H</i>",
     "correct": false,
     "explanation": "Nothing is divided by the number of heads; each head's matrix is a full softmax, transposed."
    },
    {
     "text": "It is <i>A</i><sub><i>h</i></sub><sup>⊤</sup>: its row <i>n</i> is column <i>n</i> of <i>A</i><sub><i>h</i></sub>",
     "correct": true,
     "explanation": "With <i>U</i><sub><i>q</i>,<i>h</i></sub> = <i>W</i><sub><i>Q</i>,<i>h</i></sub><sup>⊤</sup> and <i>U</i><sub><i>k</i>,<i>h</i></sub> = <i>W</i><sub><i>K</i>,<i>h</i></sub><sup>⊤</sup>, entry (<i>n</i>, <i>n</i>′) of <i>Q</i><sub><i>h</i></sub> <i>K</i><sub><i>h</i></sub><sup>⊤</sup> is the score <i>k</i><sub><i>h</i>,<i>n</i>′</sub><sup>⊤</sup> <i>q</i><sub><i>h</i>,<i>n</i></sub>; a softmax along rows of the transpose is a softmax down columns of the original."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Two variants of the layer: (a) average the heads instead of adding them; (b) put a GELU on keys and queries. Which still describe the same family of functions as the usual layer?",
   "options": [
    {
     "text": "Both",
     "correct": false,
     "explanation": "Averaging does, but a GELU on keys and queries changes the scores into something the bilinear form of the usual layer cannot express."
    },
    {
     "text": "Neither",
     "correct": false,
     "explanation": "Averaging only rescales each <i>V</i><sub><i>h</i></sub> by 1/<i>H</i>, which a learned value map can undo: (a) is the same family at a different scale."
    },
    {
     "text": "Only (a)",
     "correct": true,
     "explanation": "Averaging is the sum with every <i>V</i><sub><i>h</i></sub> divided by <i>H</i>, which the value maps can absorb. A GELU makes the scores stop being the bilinear form <i>x</i><sub><i>n</i>′</sub><sup>⊤</sup> <i>U</i><sub><i>k</i>,<i>h</i></sub><sup>⊤</sup> <i>U</i><sub><i>q</i>,<i>h</i></sub> <i>x</i><sub><i>n</i></sub>, so (b) has no equivalent."
    },
    {
     "text": "Only (b)",
     "correct": false,
     "explanation": "It is the other way round: the GELU leaves the family, averaging stays in it."
    }
   ]
  }
 ],
 "04_mlp": [
  {
   "type": "choice",
   "question": "For the token-wise MLP, what is the Jacobian block ∂ <i>x</i><sub><i>n</i></sub> / ∂ <i>y</i><sub><i>n</i>′</sub> for two different tokens, <i>n</i> ≠ <i>n</i>′?",
   "options": [
    {
     "text": "<i>W</i><sub>2</sub> diag(<i>σ</i>′(<i>W</i><sub>1</sub> <i>y</i><sub><i>n</i></sub> + <i>b</i><sub>1</sub>)) <i>W</i><sub>1</sub>",
     "correct": false,
     "explanation": "That is the diagonal block, <i>n</i> = <i>n</i>′. Between different tokens the block is zero."
    },
    {
     "text": "Zero",
     "correct": true,
     "explanation": "<i>x</i><sub><i>n</i></sub> = <code>MLP</code>(<i>y</i><sub><i>n</i></sub>) has <i>y</i><sub><i>n</i></sub> and nothing else on the right, so it does not depend on any other token: the Jacobian is block diagonal."
    },
    {
     "text": "The same non-zero matrix for every pair of tokens",
     "correct": false,
     "explanation": "Only the diagonal blocks are non-zero, and even they differ from token to token through <i>σ</i>′."
    },
    {
     "text": "A matrix that depends on the attention weights",
     "correct": false,
     "explanation": "That describes attention's Jacobian, whose blocks grow with how strongly outputs attend to an input. The MLP has no attention weights."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "An MLP with one hidden layer on tokens of width <i>D</i> = 64 has hidden width <i>F</i> = 256. How many parameters does it have, biases included?",
   "answer": 33088,
   "answer_text": "33,088",
   "explanation": "2<i>D</i><i>F</i> + <i>F</i> + <i>D</i> = 32,768 + 256 + 64 = 33,088: two weight matrices of <i>D</i> <i>F</i> entries, a bias of <i>F</i> and a bias of <i>D</i>.",
   "hint": "Count <i>W</i><sub>1</sub> (<i>F</i> × <i>D</i>), <i>b</i><sub>1</sub> (<i>F</i>), <i>W</i><sub>2</sub> (<i>D</i> × <i>F</i>) and <i>b</i><sub>2</sub> (<i>D</i>).",
   "mistakes": [
    {
     "value": 32768,
     "explanation": "2<i>D</i><i>F</i> counts the two weight matrices only; add the biases <i>b</i><sub>1</sub> (<i>F</i> numbers) and <i>b</i><sub>2</sub> (<i>D</i>)."
    },
    {
     "value": 16384,
     "explanation": "4<i>D</i><sup>2</sup> = 16,384 is the factored attention layer beside the MLP, not the MLP."
    },
    {
     "value": 33024,
     "explanation": "That leaves out <i>b</i><sub>2</sub>, the <i>D</i> = 64 biases of the second layer."
    },
    {
     "value": 32832,
     "explanation": "That leaves out <i>b</i><sub>1</sub>, the <i>F</i> = 256 biases of the hidden layer."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Replace the nonlinearity <i>σ</i> by the identity. What is the MLP then?",
   "options": [
    {
     "text": "Something more expressive than one linear map, since <i>F</i> &gt; <i>D</i>",
     "correct": false,
     "explanation": "The wide hidden layer buys nothing without <i>σ</i>: <i>W</i><sub>2</sub> <i>W</i><sub>1</sub> is a <i>D</i> × <i>D</i> matrix, of rank at most <i>D</i>."
    },
    {
     "text": "A linear map without bias, <i>y</i> ↦ <i>W</i><sub>2</sub> <i>W</i><sub>1</sub> <i>y</i>",
     "correct": false,
     "explanation": "The biases do not vanish: they combine into one constant, <i>W</i><sub>2</sub> <i>b</i><sub>1</sub> + <i>b</i><sub>2</sub>, so the MLP is an affine map, not a linear one."
    },
    {
     "text": "One affine map, <i>y</i> ↦ <i>W</i><sub>2</sub> <i>W</i><sub>1</sub> <i>y</i> + (<i>W</i><sub>2</sub> <i>b</i><sub>1</sub> + <i>b</i><sub>2</sub>)",
     "correct": true,
     "explanation": "Without <i>σ</i> the two layers compose into one: two linear layers are no more expressive than one, and every diagonal Jacobian block equals <i>W</i><sub>2</sub> <i>W</i><sub>1</sub>."
    },
    {
     "text": "Not expressible as one map, because of the biases",
     "correct": false,
     "explanation": "The biases combine into one constant, <i>W</i><sub>2</sub> <i>b</i><sub>1</sub> + <i>b</i><sub>2</sub>: the MLP is a single affine map."
    }
   ]
  },
  {
   "type": "choice",
   "question": "With Vaswani et al.'s <i>F</i> = 4<i>D</i> and one hidden layer, roughly what share of a block's parameters sits in the MLP, next to a factored attention layer of 4<i>D</i><sup>2</sup>?",
   "options": [
    {
     "text": "About two thirds",
     "correct": true,
     "explanation": "The MLP has about 2<i>D</i><i>F</i> = 8<i>D</i><sup>2</sup> weights against attention's 4<i>D</i><sup>2</sup>, so 8/(8+4) = 2/3."
    },
    {
     "text": "About one half",
     "correct": false,
     "explanation": "That is the book's vision transformer, with <i>F</i> = 2<i>D</i>: 4<i>D</i><sup>2</sup> in the MLP against 4<i>D</i><sup>2</sup> in attention."
    },
    {
     "text": "About one third",
     "correct": false,
     "explanation": "This swaps the two: with <i>F</i> = 4<i>D</i> the MLP has twice as many parameters as attention, not half as many."
    },
    {
     "text": "About four fifths",
     "correct": false,
     "explanation": "That would need 2<i>D</i><i>F</i> = 16<i>D</i><sup>2</sup>, a hidden width of <i>F</i> = 8<i>D</i>."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Which statement about the GELU and the ReLU, as the chapter compares them, is right?",
   "options": [
    {
     "text": "They differ most for inputs far from zero, not near it",
     "correct": false,
     "explanation": "Far from zero they agree: both pass large positive inputs and silence large negative ones. They differ near zero."
    },
    {
     "text": "<code>jax.nn.gelu</code> computes the exact <i>z</i> Φ(<i>z</i>) by default",
     "correct": false,
     "explanation": "By default it uses the tanh approximation; pass <code>approximate=False</code> for the exact one. The two differ by less than 10<sup>−3</sup>."
    },
    {
     "text": "The GELU keeps a slope for moderately negative inputs",
     "correct": true,
     "explanation": "Near zero <i>z</i> Φ(<i>z</i>) is smooth and slightly negative for negative <i>z</i>, so a unit that is slightly off still gets gradient."
    },
    {
     "text": "The GELU, like the ReLU, is never negative",
     "correct": false,
     "explanation": "Unlike the ReLU, the GELU dips a little below zero for negative inputs."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why is the token-wise MLP cheap to run on a whole sequence?",
   "options": [
    {
     "text": "It has few parameters next to the attention layer",
     "correct": false,
     "explanation": "It holds a large share of a block's parameters (about two thirds with <i>F</i> = 4<i>D</i>); its speed comes from the shape of the computation, not from its size."
    },
    {
     "text": "Its cost grows with <i>N</i><sup>2</sup>, like attention's, but with a small constant",
     "correct": false,
     "explanation": "Its cost grows linearly with <i>N</i>, the same work for every token; <i>N</i><sup>2</sup> belongs to attention's score matrix. The speed comes from the shape: two large matrix products."
    },
    {
     "text": "<code>jax.vmap</code> runs a Python loop over the tokens in parallel",
     "correct": false,
     "explanation": "<code>jax.vmap</code> writes no loop at all: it rewrites the one-token function into batched array operations, here the same matrix products."
    },
    {
     "text": "On all <i>N</i> tokens it is two matrix products on the whole array",
     "correct": true,
     "explanation": "<code>MLP</code>(<i>Y</i>) = <i>W</i><sub>2</sub> <i>σ</i>(<i>W</i><sub>1</sub> <i>Y</i> + <i>b</i><sub>1</sub> <b>1</b><sup>⊤</sup>) + <i>b</i><sub>2</sub> <b>1</b><sup>⊤</sup>: large matrix products are the operation accelerators are built for."
    }
   ]
  }
 ],
 "05_residuals_and_layernorm": [
  {
   "type": "choice",
   "question": "With residual connections, ∂ <i>x</i><sup>(<i>M</i>)</sup> / ∂ <i>x</i><sup>(<i>m</i>)</sup> = (<i>I</i> + <i>J</i><sub><i>M</i></sub>) ⋯ (<i>I</i> + <i>J</i><sub><i>m</i>+1</sub>). Why does this keep the gradient from vanishing?",
   "options": [
    {
     "text": "Because the Jacobians <i>J</i><sub><i>m</i></sub> are small",
     "correct": false,
     "explanation": "Small Jacobians are exactly what makes a plain stack's gradient vanish; the residual product is safe because of its identity term."
    },
    {
     "text": "Multiplied out, it contains <i>I</i>: a direct path to every block",
     "correct": true,
     "explanation": "A plain stack has <i>J</i><sub><i>M</i></sub> ⋯ <i>J</i><sub><i>m</i>+1</sub>, which shrinks or grows geometrically; the residual product always keeps <i>I</i>, and the other terms add to it."
    },
    {
     "text": "LayerNorm in each block rescales the gradients back to size one",
     "correct": false,
     "explanation": "The residual-only stack of the chapter has no LayerNorm, and its gradient still does not vanish: the identity path does it."
    },
    {
     "text": "Every <i>J</i><sub><i>m</i></sub> is orthogonal, so no factor changes the gradient's size",
     "correct": false,
     "explanation": "Nothing makes random Jacobians orthogonal; the argument needs only the <i>I</i> in each factor."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Over which entries does LayerNorm, as a transformer uses it, take its mean and standard deviation?",
   "options": [
    {
     "text": "One feature over all tokens of all examples in the batch",
     "correct": false,
     "explanation": "That is BatchNorm, which makes a prediction depend on the rest of the batch."
    },
    {
     "text": "One feature over the tokens of one example",
     "correct": false,
     "explanation": "That is InstanceNorm, which shares statistics across the tokens of a sequence."
    },
    {
     "text": "Everything in one example, all its tokens and features",
     "correct": false,
     "explanation": "That is GroupNorm with one group; it too lets tokens influence each other through the statistics."
    },
    {
     "text": "The <i>D</i> features of one token",
     "correct": true,
     "explanation": "One (<i>μ</i>, <i>σ</i>) per token, so each token's output depends on that token alone."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Which change to a token leaves LayerNorm's output unchanged (ignoring the tiny <i>ε</i>)?",
   "options": [
    {
     "text": "Scaling by a positive number and shifting all features alike",
     "correct": true,
     "explanation": "Subtracting the mean removes the constant, and dividing by <i>σ</i> removes the positive factor: LayerNorm forgets each token's own mean and scale."
    },
    {
     "text": "Multiplying it by any non-zero number, −1 included",
     "correct": false,
     "explanation": "The mean and the deviations change sign while <i>σ</i> stays positive, so the normalised token changes sign too."
    },
    {
     "text": "Adding a different constant to each feature",
     "correct": false,
     "explanation": "Only a constant shared by all features drops out with the mean; different constants change the token's shape."
    },
    {
     "text": "Only adding a constant to all features; a change of scale shows",
     "correct": false,
     "explanation": "Dividing by σ removes a positive factor as well: LayerNorm forgets each token's scale, not only its mean."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "After LayerNorm with <i>γ</i> = 1, <i>β</i> = 0, every token of width <i>D</i> = 64 has mean zero and standard deviation one. What is its Euclidean length?",
   "answer": 8,
   "explanation": "The squares of the features average to one, so they sum to <i>D</i>: the length is √<i>D</i> = 8. The token lies on the sphere of radius √<i>D</i> in the hyperplane orthogonal to (1, …, 1).",
   "hint": "A standard deviation of one with mean zero means the mean of the squared features is one.",
   "mistakes": [
    {
     "value": 1,
     "explanation": "One is the root mean square of the features; the length adds up all <i>D</i> squares."
    },
    {
     "value": 64,
     "explanation": "64 is the squared length, <i>D</i>; take the square root."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "In the pre-norm stack each block adds a contribution of size <i>c</i> in an unrelated direction, so rms(<i>x</i><sup>(<i>m</i>)</sup>)<sup>2</sup> ≈ rms(<i>x</i><sup>(0)</sup>)<sup>2</sup> + <i>m</i> <i>c</i><sup>2</sup>. With rms(<i>x</i><sup>(0)</sup>) = 1 and <i>c</i><sup>2</sup> = 4, what is rms(<i>x</i><sup>(48)</sup>)?",
   "answer": 13.892,
   "tolerance": 0.15,
   "answer_text": "about 13.9",
   "explanation": "√(1 + 48 · 4) = √(193) ≈ 13.9: the stream grows about 14-fold over 48 blocks, like a square root of the depth, not geometrically.",
   "hint": "Add the 48 contributions of <i>c</i><sup>2</sup> to the input's squared size, then take the square root.",
   "mistakes": [
    {
     "value": 193,
     "explanation": "193 is the squared size; the root mean square is its square root."
    },
    {
     "value": 6.928,
     "explanation": "√(48) leaves out both the input's size and <i>c</i><sup>2</sup> = 4."
    },
    {
     "value": 49,
     "explanation": "1 + 48 forgets that each block adds <i>c</i><sup>2</sup> = 4, and the square root."
    }
   ]
  },
  {
   "type": "choice",
   "question": "RMSNorm divides each token by its root mean square and subtracts nothing. Which of LayerNorm's invariances does it keep?",
   "options": [
    {
     "text": "Both, as LayerNorm does",
     "correct": false,
     "explanation": "RMSNorm subtracts no mean, so a constant added to every feature stays in the output."
    },
    {
     "text": "Only the shift invariance",
     "correct": false,
     "explanation": "It is the other way round: the division removes the scale, and without a mean subtraction the shift survives."
    },
    {
     "text": "Only the scale invariance",
     "correct": true,
     "explanation": "A positive factor cancels in <i>x</i> / rms(<i>x</i>), but adding a constant changes the root mean square and the direction: nothing removes it."
    },
    {
     "text": "Neither: without the mean, nothing cancels",
     "correct": false,
     "explanation": "Dividing by the root mean square does remove any positive factor, so the scale invariance stays."
    }
   ]
  }
 ],
 "06_transformer_block": [
  {
   "type": "choice",
   "question": "Both branches of a block output zero (value maps and the MLP's last layer are zero). What do the standard pre-norm block and the reference's form compute?",
   "options": [
    {
     "text": "The standard block returns <i>X</i>; the reference's form returns <code>LayerNorm</code>(<i>X</i>)",
     "correct": true,
     "explanation": "The standard block adds the branches to <i>X</i><sup>(<i>m</i>−1)</sup> itself, so silent branches leave the identity; the reference's first addition starts from <i>X̄</i><sup>(<i>m</i>−1)</sup>."
    },
    {
     "text": "Both return <i>X</i>: silent branches leave the identity",
     "correct": false,
     "explanation": "The reference's form adds the attention output to the normalised input <i>X̄</i><sup>(<i>m</i>−1)</sup>, so with silent branches it returns <code>LayerNorm</code>(<i>X</i>)."
    },
    {
     "text": "Both return LayerNorm(<i>X</i>), since each starts by normalising",
     "correct": false,
     "explanation": "The standard block's residual starts from the input itself, so it passes <i>X</i> through unchanged."
    },
    {
     "text": "The standard block returns LayerNorm(<i>X</i>); the reference's form returns <i>X</i>",
     "correct": false,
     "explanation": "It is the other way round: the standard block adds the branches to <i>X</i> itself, the reference's form to the normalised input <i>X̄</i><sup>(<i>m</i>−1)</sup>."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "Count the parameters of one block: <i>D</i> = 32, <i>H</i> = 4 heads with <i>K</i> = 8 and full <i>D</i> × <i>D</i> value maps, and an MLP of width <i>F</i> = 64.",
   "answer": 10464,
   "answer_text": "10,464",
   "explanation": "4<i>D</i> = 128 for the two LayerNorms, <i>H</i>(2<i>K</i><i>D</i> + <i>D</i><sup>2</sup>) = 4(512 + 1,024) = 6,144 for attention, and 2<i>D</i><i>F</i> + <i>F</i> + <i>D</i> = 4,192 for the MLP: 10,464 in all.",
   "hint": "Add three parts: two LayerNorms (<i>γ</i> and <i>β</i> each), <i>H</i>(2<i>K</i><i>D</i> + <i>D</i><sup>2</sup>) for attention, and 2<i>D</i><i>F</i> + <i>F</i> + <i>D</i> for the MLP.",
   "mistakes": [
    {
     "value": 10336,
     "explanation": "That leaves out the two LayerNorms, 4<i>D</i> = 128 parameters (<i>γ</i> and <i>β</i> of width <i>D</i> in each)."
    },
    {
     "value": 8416,
     "explanation": "That is the count with factored value maps of width <i>D</i><sub><i>v</i></sub> = <i>K</i> = 8; the question has full <i>D</i> × <i>D</i> maps."
    },
    {
     "value": 6144,
     "explanation": "That is attention alone; add the MLP and the two LayerNorms."
    }
   ]
  },
  {
   "type": "choice",
   "question": "How does a block's parameter count depend on the number of tokens <i>N</i>?",
   "options": [
    {
     "text": "It does not depend on <i>N</i>",
     "correct": true,
     "explanation": "No weight has an axis of length <i>N</i>: LayerNorm and the MLP act per token, and the attention matrices are computed, not stored. The same block handles any length."
    },
    {
     "text": "It grows linearly with <i>N</i>",
     "correct": false,
     "explanation": "Nothing in the block is per position; a learned position table, which would grow with the length, belongs to the tokeniser, not the block."
    },
    {
     "text": "It grows with <i>N</i><sup>2</sup>, for the attention matrices",
     "correct": false,
     "explanation": "The <i>N</i> × <i>N</i> matrices are computed from the keys and queries at every call; they are not parameters."
    },
    {
     "text": "It grows with <i>N</i> through LayerNorm's <i>γ</i> and <i>β</i>",
     "correct": false,
     "explanation": "<i>γ</i> and <i>β</i> have <i>D</i> entries, shared by all tokens."
    }
   ]
  },
  {
   "type": "choice",
   "question": "With a causal mask, <code>perm</code> swaps only the last two of <i>N</i> tokens. Which rows of <code>block(x[perm], mask)</code> equal those of <code>block(x, mask)[perm]</code>?",
   "options": [
    {
     "text": "The first <i>N</i> − 2 rows",
     "correct": true,
     "explanation": "The first <i>N</i> − 2 positions, and everything they may see, are unchanged. The last two outputs now see different sets of tokens, so they change."
    },
    {
     "text": "All rows: the block is permutation equivariant",
     "correct": false,
     "explanation": "A causal block is no longer permutation equivariant: each output sees the tokens before its position, and the swap changes that for the last two."
    },
    {
     "text": "No rows: every output's set of tokens has changed",
     "correct": false,
     "explanation": "Outputs before the swapped positions see exactly the same tokens as before, so they agree."
    },
    {
     "text": "All rows but the last",
     "correct": false,
     "explanation": "The second-to-last position now holds the last token and sees a different set of tokens, so that row changes too, as does the last."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Which statement about the post-norm block of the original transformer is right?",
   "options": [
    {
     "text": "No path avoids a LayerNorm, and it needs a learning-rate warm-up",
     "correct": true,
     "explanation": "LayerNorm sits after each residual addition. Xiong et al. trace the need for warm-up to this, and pre-norm trains without it."
    },
    {
     "text": "It trains without a warm-up; pre-norm is the one that needs it",
     "correct": false,
     "explanation": "It is the other way round: pre-norm can be trained without warm-up, post-norm needs it."
    },
    {
     "text": "Like pre-norm, it needs one final LayerNorm after the last block",
     "correct": false,
     "explanation": "Post-norm's outputs are already normalised. The pre-norm stack, whose residual stream is never normalised, is the one that adds a final LayerNorm."
    },
    {
     "text": "It is the chapter's reference form under another name",
     "correct": false,
     "explanation": "The reference's form adds the attention output to the normalised input; post-norm normalises after each addition. They are different arrangements."
    }
   ]
  },
  {
   "type": "choice",
   "question": "What can the reference's block not see that the standard block keeps in its residual stream?",
   "options": [
    {
     "text": "Each token's own mean and scale",
     "correct": true,
     "explanation": "Every path through the reference's block starts from <i>X̄</i><sup>(<i>m</i>−1)</sup>, so scaling a token by a positive number or shifting all its features gives the same output."
    },
    {
     "text": "The order of the tokens",
     "correct": false,
     "explanation": "Neither form sees the order: both blocks are permutation equivariant."
    },
    {
     "text": "The sign of each token, which LayerNorm removes",
     "correct": false,
     "explanation": "Multiplying a token by −1 does change LayerNorm's output, so the reference's block sees it."
    },
    {
     "text": "The attention weights of earlier blocks",
     "correct": false,
     "explanation": "No block sees earlier attention weights directly in either form; each reads only the tokens it receives."
    }
   ]
  }
 ],
 "07_tokens_and_embeddings": [
  {
   "type": "numeric",
   "question": "An MNIST digit of 28 × 28 pixels is cut into patches with <i>P</i> = 4. How many tokens <i>N</i> does it become?",
   "answer": 49,
   "explanation": "<i>N</i> = <i>I</i><sub><i>h</i></sub> <i>I</i><sub><i>w</i></sub> / <i>P</i><sup>2</sup> = 784 / 16 = 49: a 7 × 7 grid of patches, each a token of <i>P</i><sup>2</sup> = 16 values.",
   "hint": "Count the patches along one side, 28 / <i>P</i>, and square it.",
   "mistakes": [
    {
     "value": 7,
     "explanation": "7 is the number of patches along one side; the grid has 7 × 7."
    },
    {
     "value": 16,
     "explanation": "16 is the length of each token, <i>P</i><sup>2</sup> pixels, not the number of tokens."
    },
    {
     "value": 196,
     "explanation": "784 / 4 divides by <i>P</i>; a patch covers <i>P</i><sup>2</sup> = 16 pixels."
    }
   ]
  },
  {
   "type": "choice",
   "question": "A discrete tokeniser looks up <i>z</i><sub><i>s</i><sub><i>n</i></sub></sub>, row <i>s</i><sub><i>n</i></sub> of its table. Which statement is right?",
   "options": [
    {
     "text": "Indexing is not linear, so the lookup has no matrix form",
     "correct": false,
     "explanation": "It is linear: <i>z</i><sub><i>s</i><sub><i>n</i></sub></sub> = <i>Z</i> <i>e</i><sub><i>s</i><sub><i>n</i></sub></sub>, a matrix times a one-hot vector."
    },
    {
     "text": "Every row of the table gets a gradient at every step",
     "correct": false,
     "explanation": "A row enters the loss only where its symbol occurs; the rows of absent symbols get zero gradient."
    },
    {
     "text": "It is the linear map <i>Z</i> <i>e</i><sub><i>s</i><sub><i>n</i></sub></sub> on a one-hot vector",
     "correct": true,
     "explanation": "Indexing gives the same numbers as the product with a one-hot vector without multiplying by all the zeros."
    },
    {
     "text": "The lookup equals a continuous tokeniser only with a non-zero bias",
     "correct": false,
     "explanation": "The discrete case is the continuous one with one-hot inputs, <i>W</i> = <i>Z</i> and bias <i>b</i> = 0."
    }
   ]
  },
  {
   "type": "choice",
   "question": "How does adding position embeddings relate to concatenating them?",
   "options": [
    {
     "text": "Adding destroys the word's information, which concatenating keeps",
     "correct": false,
     "explanation": "Both are still in the sum, and with <i>D</i> dimensions the learned arrays arrange themselves so that later layers can keep them apart well enough."
    },
    {
     "text": "Adding is concatenating followed by the fixed map [<i>I</i><sub><i>D</i></sub>   <i>I</i><sub><i>D</i></sub>]",
     "correct": true,
     "explanation": "[<i>I</i><sub><i>D</i></sub>   <i>I</i><sub><i>D</i></sub>] applied to the concatenation adds the two halves. A learned map after concatenation could treat word and position separately, which addition gives up."
    },
    {
     "text": "Concatenating keeps the width <i>D</i> and needs no extra parameters",
     "correct": false,
     "explanation": "Concatenation gives a token whose width is the sum of the two widths."
    },
    {
     "text": "Adding works only with sinusoidal tables, not learned ones",
     "correct": false,
     "explanation": "ViT and most transformers add learned tables; the package's <code>PositionEmbedding</code> adds or concatenates either kind."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why does the sinusoidal embedding pair every sine with a cosine of the same frequency?",
   "options": [
    {
     "text": "A shift by <i>k</i> positions is then one rotation of each pair, for every <i>n</i>",
     "correct": true,
     "explanation": "PE<sub><i>n</i>+<i>k</i></sub> = <i>S</i><sub><i>k</i></sub> PE<sub><i>n</i></sub> with <i>S</i><sub><i>k</i></sub> independent of <i>n</i>, so a linear map, the stuff attention is made of, can shift positions."
    },
    {
     "text": "To keep every entry between −1 and 1 at any position",
     "correct": false,
     "explanation": "Sines alone already stay in [−1, 1]; the cosines are needed for the shift."
    },
    {
     "text": "To give each pair two frequencies, doubling the positions it can tell apart",
     "correct": false,
     "explanation": "Each pair shares one frequency <i>ω</i><sub><i>i</i></sub>; the cosine adds a second coordinate, not a frequency."
    },
    {
     "text": "So that the dot product tells an offset before from one after",
     "correct": false,
     "explanation": "PE<sub><i>n</i></sub><sup>⊤</sup> PE<sub><i>n</i>′</sub> = Σ<sub><i>i</i></sub> cos((<i>n</i> − <i>n</i>′)<i>ω</i><sub><i>i</i></sub>) is even in the offset: it cannot tell them apart. Learned <i>U</i><sub><i>k</i></sub>, <i>U</i><sub><i>q</i></sub> can."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "What is PE<sub><i>n</i></sub><sup>⊤</sup> PE<sub><i>n</i></sub>, the sinusoidal similarity at offset zero, for width <i>D</i> = 64?",
   "answer": 32,
   "explanation": "Each of the <i>D</i>/2 = 32 pairs contributes sin<sup>2</sup> + cos<sup>2</sup> = 1, i.e. cos 0: the peak of the similarity is <i>D</i>/2.",
   "hint": "Sum cos((<i>n</i> − <i>n</i>′)<i>ω</i><sub><i>i</i></sub>) over the pairs <i>i</i> = 0, …, <i>D</i>/2 − 1 at <i>n</i> = <i>n</i>′.",
   "mistakes": [
    {
     "value": 64,
     "explanation": "There are <i>D</i>/2 pairs, not <i>D</i>: each pair of coordinates contributes one cos 0 = 1."
    },
    {
     "value": 1,
     "explanation": "One is each pair's share; there are <i>D</i>/2 = 32 pairs."
    }
   ]
  },
  {
   "type": "choice",
   "question": "With rotary embeddings, on what does the score between a key at <i>n</i>′ and a query at <i>n</i> depend?",
   "options": [
    {
     "text": "On the content and on both positions <i>n</i>, <i>n</i>′ separately",
     "correct": false,
     "explanation": "The two rotations combine into one by the difference of angles; shifting both positions by the same amount leaves the score unchanged."
    },
    {
     "text": "On the offset alone, not on the content",
     "correct": false,
     "explanation": "The unrotated keys and queries, <i>U</i><sub><i>k</i></sub> <i>x</i><sub><i>n</i>′</sub> and <i>U</i><sub><i>q</i></sub> <i>x</i><sub><i>n</i></sub>, still carry the tokens' content."
    },
    {
     "text": "On |<i>n</i> − <i>n</i>′|, so before and after look the same",
     "correct": false,
     "explanation": "<i>R</i><sub>−<i>k</i></sub> = <i>R</i><sub><i>k</i></sub><sup>⊤</sup> differs from <i>R</i><sub><i>k</i></sub>, so a key three places before and one three places after get different scores."
    },
    {
     "text": "On the content and the offset <i>n</i> − <i>n</i>′ only",
     "correct": true,
     "explanation": "<i>R</i><sub><i>n</i>′</sub><sup>⊤</sup> <i>R</i><sub><i>n</i></sub> = <i>R</i><sub><i>n</i> − <i>n</i>′</sub>, so <i>k</i><sub><i>n</i>′</sub><sup>⊤</sup> <i>q</i><sub><i>n</i></sub> = (<i>U</i><sub><i>k</i></sub> <i>x</i><sub><i>n</i>′</sub>)<sup>⊤</sup> <i>R</i><sub><i>n</i>−<i>n</i>′</sub> (<i>U</i><sub><i>q</i></sub> <i>x</i><sub><i>n</i></sub>): nothing else about the positions survives."
    }
   ]
  }
 ],
 "08_vision_transformer": [
  {
   "type": "numeric",
   "question": "The chapter's ViT cuts a 28 × 28 digit into 7 × 7 patches and puts a class token in front. How many tokens does each block process?",
   "answer": 17,
   "explanation": "(28/7)<sup>2</sup> = 16 patch tokens plus the class token <i>x</i><sub>0</sub>: 17 columns of <i>X</i><sup>(0)</sup>.",
   "hint": "Count the patches on the 4 × 4 grid, then remember the token that has no pixels of its own.",
   "mistakes": [
    {
     "value": 16,
     "explanation": "16 counts the patches only; the class token <i>x</i><sub>0</sub> is put in front of them."
    },
    {
     "value": 49,
     "explanation": "49 is the number of pixels in one 7 × 7 patch (or the patch count for <i>P</i> = 4)."
    },
    {
     "value": 50,
     "explanation": "50 is the count for <i>P</i> = 4: 49 patches and the class token."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A model that knows nothing gives equal logits to all <i>C</i> = 10 classes. What is its cross-entropy per example, in nats?",
   "answer": 2.3026,
   "tolerance": 0.01,
   "answer_text": "ln 10 ≈ 2.30",
   "explanation": "Each class gets <i>p</i><sub><i>c</i></sub> = 1/10, so the loss is −log(1/10) = log 10 ≈ 2.30.",
   "hint": "With equal logits the softmax is uniform; take minus the natural logarithm of the true class's probability.",
   "mistakes": [
    {
     "value": 1,
     "explanation": "That is log<sub>10</sub> 10. The loss uses the natural logarithm."
    },
    {
     "value": 3.3219,
     "explanation": "That is log<sub>2</sub> 10, the loss in bits; in nats it is ln 10."
    },
    {
     "value": 0.1,
     "explanation": "0.1 is the probability each class gets, not the loss."
    }
   ]
  },
  {
   "type": "choice",
   "question": "What is the gradient of an example's cross-entropy with respect to its logit <i>o</i><sub><i>b</i>,<i>c</i></sub>?",
   "options": [
    {
     "text": "−1 / <i>p</i><sub><i>c</i><sub><i>b</i></sub></sub>(<i>o</i><sub><i>b</i></sub>)",
     "correct": false,
     "explanation": "That is the derivative with respect to the true class's probability, not with respect to a logit."
    },
    {
     "text": "[<i>c</i> = <i>c</i><sub><i>b</i></sub>] − <i>p</i><sub><i>c</i></sub>(<i>o</i><sub><i>b</i></sub>)",
     "correct": false,
     "explanation": "The sign is flipped: this is the direction of a descent step, minus the gradient."
    },
    {
     "text": "<i>p</i><sub><i>c</i></sub>(<i>o</i><sub><i>b</i></sub>) − [<i>c</i> = <i>c</i><sub><i>b</i></sub>]",
     "correct": true,
     "explanation": "The predicted distribution minus the one-hot label: every wrong class is pushed down in proportion to its probability, the true class up by what it lacked."
    },
    {
     "text": "Zero for every wrong class",
     "correct": false,
     "explanation": "Wrong classes get <i>p</i><sub><i>c</i></sub>(<i>o</i><sub><i>b</i></sub>), which is positive: they are pushed down too."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "Adam with <i>β</i><sub>1</sub> = 0.9 starts from <i>μ</i><sub>−1</sub> = 0, so after the first step <i>μ</i><sub>0</sub> = 0.1  <i>g</i><sub>0</sub>. By what factor does the bias correction multiply <i>μ</i><sub>0</sub>?",
   "answer": 10,
   "explanation": "<i>μ̂</i><sub>0</sub> = <i>μ</i><sub>0</sub> / (1 − <i>β</i><sub>1</sub><sup>1</sup>) = <i>μ</i><sub>0</sub> / 0.1: a factor of 10, which restores <i>g</i><sub>0</sub>.",
   "hint": "Bias correction divides <i>μ</i><sub><i>t</i></sub> by 1 − <i>β</i><sub>1</sub><sup><i>t</i>+1</sup>; use <i>t</i> = 0.",
   "mistakes": [
    {
     "value": 1,
     "explanation": "Without correction the factor would be one, and <i>μ</i><sub>0</sub> would be ten times too small."
    },
    {
     "value": 0.1,
     "explanation": "0.1 is 1 − <i>β</i><sub>1</sub>, the divisor; the correction divides by it."
    }
   ]
  },
  {
   "type": "choice",
   "question": "What makes AdamW's weight decay <em>decoupled</em>?",
   "options": [
    {
     "text": "It is added to the gradient, then divided by Adam's √<i>v</i> like the rest",
     "correct": false,
     "explanation": "That is the coupled form the chapter contrasts it with, whose strength depends on each parameter's gradient size."
    },
    {
     "text": "Under the language models' <code>&quot;matrices&quot;</code> rule it decays every array",
     "correct": false,
     "explanation": "That rule decays only arrays with two or more axes; biases, gains and shifts are left alone."
    },
    {
     "text": "Its strength <i>λ</i> does not depend on the learning rate <i>η</i><sub><i>t</i></sub> of the step",
     "correct": false,
     "explanation": "Here the decay is <i>η</i><sub><i>t</i></sub> <i>λ</i>: it follows the schedule. What is decoupled is the decay from Adam's normalisation of the gradient."
    },
    {
     "text": "Added to the step, not the gradient, it shrinks each entry by 1 − <i>η</i><sub><i>t</i></sub> <i>λ</i>",
     "correct": true,
     "explanation": "Added to the gradient, the decay would pass through Adam's division and be strong for parameters with small gradients and weak for those with large ones."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Inverted dropout with <i>p</i> = 0.5 multiplies every kept unit by 2 during training. What does the layer do at test time?",
   "options": [
    {
     "text": "It multiplies every unit by 0.5",
     "correct": false,
     "explanation": "That is the test-time rescaling of the original, non-inverted dropout; inverted dropout moved the factor into training."
    },
    {
     "text": "It keeps dropping units with probability 0.5",
     "correct": false,
     "explanation": "Dropout is switched off at test time; only training draws the random keep-mask."
    },
    {
     "text": "Nothing: it is the identity",
     "correct": true,
     "explanation": "Scaling by 1/(1−<i>p</i>) in training keeps each unit's expected value, so the test-time network needs no change."
    },
    {
     "text": "It multiplies every unit by 2",
     "correct": false,
     "explanation": "The factor 2 compensates for the dropped units during training; with nothing dropped it would double the expected value."
    }
   ]
  }
 ],
 "09_language_model": [
  {
   "type": "numeric",
   "question": "A model's loss is 1.6 nats per character. How many bits per character is that?",
   "answer": 2.3083,
   "tolerance": 0.01,
   "answer_text": "about 2.31",
   "explanation": "Bits are nats divided by ln 2: 1.6 / 0.693 ≈ 2.31.",
   "hint": "One bit is ln 2 ≈ 0.693 nats.",
   "mistakes": [
    {
     "value": 1.109,
     "explanation": "That multiplies by ln 2; converting nats to bits divides by it."
    },
    {
     "value": 3.2,
     "explanation": "Doubling is not the conversion; divide by ln 2 ≈ 0.693."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "One pass over a window of 65 characters is trained with the next-symbol loss. How many predictions does it make?",
   "answer": 64,
   "explanation": "The inputs are <i>s</i><sub>1</sub>, …, <i>s</i><sub>64</sub> and the symbols to predict are the same ones shifted by one, <i>s</i><sub>2</sub>, …, <i>s</i><sub>65</sub>: 64 predictions at once.",
   "hint": "Every input position predicts the symbol after it; the last character of the window is only ever predicted.",
   "mistakes": [
    {
     "value": 65,
     "explanation": "The 65th character has no successor in the window, so it is an answer, never an input."
    },
    {
     "value": 1,
     "explanation": "Thanks to the causal mask every position makes its own prediction, not just the last."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why does the causal mask go into attention and nowhere else?",
   "options": [
    {
     "text": "The MLP needs a mask too, and the package applies it there",
     "correct": false,
     "explanation": "The MLP never mixes tokens, so there is nothing to mask in it."
    },
    {
     "text": "The mask is applied to the loss, not to the model",
     "correct": false,
     "explanation": "The loss uses shifted symbols; the mask itself sets forbidden scores to −∞ inside attention."
    },
    {
     "text": "Attention is the only place where tokens mix",
     "correct": true,
     "explanation": "Forbidding <i>A</i><sub><i>n</i>′,<i>n</i></sub> for <i>n</i>′ &gt; <i>n</i> in every block is then enough for output <i>n</i> to depend on <i>s</i><sub>1</sub>, …, <i>s</i><sub><i>n</i></sub> only."
    },
    {
     "text": "It zeroes the forbidden weights after the softmax, without renormalising",
     "correct": false,
     "explanation": "The scores are set to −∞ before the softmax, so each column still sums to one over <i>n</i>′ ≤ <i>n</i>."
    }
   ]
  },
  {
   "type": "choice",
   "question": "A temperature divides the logits, <i>p</i><sub><i>τ</i></sub>(<i>v</i>) ∝ exp(<i>o</i><sub><i>v</i></sub> / <i>τ</i>). What happens as <i>τ</i> → 0?",
   "options": [
    {
     "text": "The distribution becomes uniform over all symbols",
     "correct": false,
     "explanation": "That is the limit <i>τ</i> → ∞, where all logits shrink towards zero."
    },
    {
     "text": "Nothing, since the softmax normalises anyway",
     "correct": false,
     "explanation": "The normalisation keeps the sum at one, but the shape depends on <i>τ</i>: smaller <i>τ</i> sharpens it."
    },
    {
     "text": "The logits blow up, so the softmax overflows and returns nan",
     "correct": false,
     "explanation": "Implementations subtract the largest logit first, so nothing overflows; the limit is the distribution with all its weight on the largest logit."
    },
    {
     "text": "It becomes greedy: always the likeliest symbol",
     "correct": true,
     "explanation": "Dividing by a tiny <i>τ</i> blows up the gaps between logits, so all the probability goes to the largest one."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why may a key-value cache keep the keys and values of earlier positions when a new symbol is appended?",
   "options": [
    {
     "text": "Keys and values depend only on the weights, not on the text",
     "correct": false,
     "explanation": "They are projections of each block's tokens, which depend on the text; what makes them reusable is the mask."
    },
    {
     "text": "The cache would work just as well without the causal mask",
     "correct": false,
     "explanation": "Without the mask, the tokens at earlier positions in later blocks would read the new symbol, and their keys and values would change."
    },
    {
     "text": "Under the causal mask, the keys and values at <i>n</i>′ see <i>s</i><sub>1</sub>, …, <i>s</i><sub><i>n</i>′</sub> only",
     "correct": true,
     "explanation": "Appending a symbol changes nothing that earlier positions can see, so their keys and values are unchanged and need not be recomputed."
    },
    {
     "text": "The cache stores the attention matrices, which do not change as text grows",
     "correct": false,
     "explanation": "The cache holds keys (<i>H</i>, <i>N</i>, <i>K</i>) and values (<i>H</i>, <i>N</i>, <i>D</i><sub><i>v</i></sub>) per block; the new query's attention column is computed afresh."
    }
   ]
  },
  {
   "type": "choice",
   "question": "How does top-p (nucleus) sampling choose the symbols it samples from?",
   "options": [
    {
     "text": "The likeliest symbols, a fixed share <i>p</i> of the vocabulary",
     "correct": false,
     "explanation": "That keeps the same number whatever the distribution, like top-k; top-p's count follows the model's certainty."
    },
    {
     "text": "Every symbol whose own probability is at least <i>p</i>",
     "correct": false,
     "explanation": "With <i>p</i> = 0.9 that would often keep no symbol at all; top-p adds probabilities up from the largest."
    },
    {
     "text": "It divides the logits by <i>p</i>, like a temperature",
     "correct": false,
     "explanation": "Top-p cuts the tail of the distribution; it does not rescale the logits."
    },
    {
     "text": "The fewest likeliest symbols whose probabilities reach <i>p</i>",
     "correct": true,
     "explanation": "So the number kept follows the model's certainty: few symbols in the middle of a word, many at its start."
    }
   ]
  }
 ],
 "10_encoder_decoder": [
  {
   "type": "choice",
   "question": "In a decoder layer's cross-attention, where do the queries, keys and values come from?",
   "options": [
    {
     "text": "Queries from the source; keys and values from the output tokens",
     "correct": false,
     "explanation": "The roles are swapped: the decoder reads the source, so its tokens supply the queries."
    },
    {
     "text": "All three from <i>X̄</i>, the encoder's outputs",
     "correct": false,
     "explanation": "That is the encoder's own self-attention; cross-attention is where the two sequences meet."
    },
    {
     "text": "Keys from the source, values from the output tokens",
     "correct": false,
     "explanation": "Keys and values must come from the same tokens: the weights over source characters average the source's values."
    },
    {
     "text": "Queries from the output tokens; keys and values from <i>X̄</i>",
     "correct": true,
     "explanation": "Each output position asks its question of the source: <i>A</i>′<sub><i>h</i></sub> is <i>N</i><sub><i>s</i></sub> × <i>N</i><sub><i>t</i></sub>, source by output."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "With <i>N</i><sub><i>s</i></sub> = 32 source positions and <i>N</i><sub><i>t</i></sub> = 11 output positions, how many entries does one head's cross-attention matrix <i>A</i>′<sub><i>h</i></sub> have?",
   "answer": 352,
   "explanation": "<i>A</i>′<sub><i>h</i></sub> is <i>N</i><sub><i>s</i></sub> × <i>N</i><sub><i>t</i></sub> = 32 × 11 = 352: one column per output position, one row per source character.",
   "hint": "Rows are source positions <i>n</i>′, columns output positions <i>n</i>.",
   "mistakes": [
    {
     "value": 1024,
     "explanation": "32<sup>2</sup> would be the encoder's self-attention matrix; cross-attention is source by output."
    },
    {
     "value": 121,
     "explanation": "11<sup>2</sup> is the decoder's causal self-attention matrix."
    }
   ]
  },
  {
   "type": "choice",
   "question": "What is teacher forcing?",
   "options": [
    {
     "text": "Feeding the true output shifted right, scoring every position in one pass",
     "correct": true,
     "explanation": "The causal mask keeps position <i>n</i> from seeing the character it must predict, so all eleven positions train at once."
    },
    {
     "text": "In training the decoder reads its own greedy outputs, one at a time",
     "correct": false,
     "explanation": "That is decoding at test time; in training the true characters are fed in."
    },
    {
     "text": "Training the decoder without a causal mask, since the true output is known",
     "correct": false,
     "explanation": "The mask is what keeps teacher forcing honest: without it, position <i>n</i> could read the answer."
    },
    {
     "text": "Masking the future in the encoder, so that it cannot see the answer",
     "correct": false,
     "explanation": "The encoder is bidirectional: every source character may read every other; only padding is masked there."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A batch holds two examples of <i>N</i><sub><i>t</i></sub> = 11 output positions; in one of them the last 4 positions are padding. How many terms does the masked loss average over?",
   "answer": 18,
   "explanation": "The loss divides by Σ <i>r</i><sub><i>b</i>,<i>n</i></sub>, the number of real characters: 11 + 7 = 18. A padded position weighs nothing.",
   "hint": "Count only the positions with <i>r</i><sub><i>b</i>,<i>n</i></sub> = 1.",
   "mistakes": [
    {
     "value": 22,
     "explanation": "22 counts the padded positions too; their weight <i>r</i><sub><i>b</i>,<i>n</i></sub> is zero."
    },
    {
     "value": 14,
     "explanation": "Only one example has padding; the other keeps all 11 positions."
    }
   ]
  },
  {
   "type": "choice",
   "question": "What does beam search with <i>k</i> = 1 compute?",
   "options": [
    {
     "text": "The likeliest whole string",
     "correct": false,
     "explanation": "Greedy choices need not give the likeliest string; a larger beam searches more of them, <i>k</i> = 1 the fewest."
    },
    {
     "text": "Greedy decoding",
     "correct": true,
     "explanation": "Keeping only the single best partial output and extending it by its likeliest character is exactly the greedy rule; the chapter checks this first."
    },
    {
     "text": "A random sample from the model",
     "correct": false,
     "explanation": "Beam search is deterministic: it ranks partial outputs by their log-probabilities."
    },
    {
     "text": "An exhaustive search over all possible outputs",
     "correct": false,
     "explanation": "That would need a beam as large as the number of possible strings; <i>k</i> = 1 keeps one."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why does the trained model fail on years from the 1800s and 2100s?",
   "options": [
    {
     "text": "Those years were rare in training, and longer training would fix it",
     "correct": false,
     "explanation": "They were not rare but absent: the first two digits were only ever 19 or 20, and no amount of training teaches a copy that was never needed."
    },
    {
     "text": "Dates of those years need more than the <i>N</i><sub><i>t</i></sub> output positions",
     "correct": false,
     "explanation": "Every ISO date has ten characters, whatever the century."
    },
    {
     "text": "Training years began only with 19 or 20: a choice, not a copy",
     "correct": true,
     "explanation": "What a model can generalise to is fixed by what varied in its training data; the last two digits varied and are copied."
    },
    {
     "text": "Cross-attention cannot reach the year's position in the source",
     "correct": false,
     "explanation": "It does: the last two digits of the year are copied right; the failure is confined to the century."
    }
   ]
  }
 ],
 "11_relations": [
  {
   "type": "numeric",
   "question": "The chapter builds a 2-D convolution as attention with one content-blind head per offset. How many heads does a 5 × 5 window need?",
   "answer": 25,
   "explanation": "One head per offset Δ<sub><i>h</i></sub> of the window: <i>r</i><sup>2</sup> = 25 in two dimensions.",
   "hint": "Each head realises one offset; count the offsets of the window.",
   "mistakes": [
    {
     "value": 5,
     "explanation": "Five heads cover a window of five in one dimension; a square window has <i>r</i><sup>2</sup> offsets."
    },
    {
     "value": 9,
     "explanation": "Nine is the 3 × 3 window."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Linear attention carries a state (<i>S</i><sub><i>n</i></sub>, <i>ζ</i><sub><i>n</i></sub>) from token to token. How large is it?",
   "options": [
    {
     "text": "It grows by one key and one value per token, like a cache",
     "correct": false,
     "explanation": "That is softmax attention's key-value cache; the exponential does not factor into key features times query features."
    },
    {
     "text": "<i>N</i> × <i>N</i>: the attention matrix of the tokens so far",
     "correct": false,
     "explanation": "The parallel form builds that matrix; the recurrent form never does."
    },
    {
     "text": "There is no state; each output is computed from scratch",
     "correct": false,
     "explanation": "<i>S</i><sub><i>n</i></sub> = <i>S</i><sub><i>n</i>−1</sub> + <i>φ</i>(<i>k</i><sub><i>n</i></sub>) <i>v</i><sub><i>n</i></sub><sup>⊤</sup> is exactly a state carried along."
    },
    {
     "text": "Fixed: <i>K</i> × <i>D</i><sub><i>v</i></sub> plus <i>K</i> numbers, for any length",
     "correct": true,
     "explanation": "The sums over the past are accumulated into <i>S</i><sub><i>n</i></sub> and <i>ζ</i><sub><i>n</i></sub>, so linear attention is a recurrent network with a linear state update."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In state-space duality, every decay is the same constant, <i>a</i><sub><i>n</i></sub> = <i>γ</i>. What is the mask <i>L</i><sub><i>n</i>′,<i>n</i></sub> for <i>n</i>′ ≤ <i>n</i>?",
   "options": [
    {
     "text": "<i>γ</i><sup> <i>n</i>′ − <i>n</i></sup>",
     "correct": false,
     "explanation": "For <i>n</i>′ &lt; <i>n</i> that exponent is negative and would grow the old writes; the power counts the steps since <i>n</i>′."
    },
    {
     "text": "<i>γ</i>, for every pair",
     "correct": false,
     "explanation": "The decays multiply: an older write has passed through more of them."
    },
    {
     "text": "<i>γ</i><sup> <i>n</i> − <i>n</i>′</sup>",
     "correct": true,
     "explanation": "What was written at step <i>n</i>′ has been multiplied by every decay since, <i>n</i> − <i>n</i>′ of them: the retention mask."
    },
    {
     "text": "1, the plain causal mask",
     "correct": false,
     "explanation": "That is the case <i>a</i><sub><i>n</i></sub> = 1, unnormalised linear attention."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In the online softmax, what does the factor <i>e</i><sup><i>ŝ</i><sub><i>j</i>−1</sub> − <i>ŝ</i><sub><i>j</i></sub></sup> do?",
   "options": [
    {
     "text": "It rescales the old sums ℓ and <i>o</i> when the maximum grows",
     "correct": true,
     "explanation": "Both sums are kept relative to the largest score so far; when it grows, the old terms must shrink by the same factor, and every exponent stays at most zero."
    },
    {
     "text": "It is key <i>j</i>'s softmax weight, before the final division",
     "correct": false,
     "explanation": "Key <i>j</i>'s term is <i>e</i><sup><i>s</i><sub><i>j</i></sub> − <i>ŝ</i><sub><i>j</i></sub></sup>; the factor acts on the sums of the earlier keys."
    },
    {
     "text": "It is always one, since it cancels in the final division",
     "correct": false,
     "explanation": "It is one only while the maximum does not change, and it does not cancel: the chapter's control leaves it out and fails."
    },
    {
     "text": "It normalises the output, as the final division would",
     "correct": false,
     "explanation": "The final division <i>y</i> = <i>o</i><sub><i>N</i></sub> / ℓ<sub><i>N</i></sub> does that."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A fast-weight memory writes the scalar values <i>v</i><sub>1</sub> = 2, <i>v</i><sub>2</sub> = 5, <i>v</i><sub>3</sub> = 6 under the unit keys <i>e</i><sub>1</sub>, <i>e</i><sub>2</sub>, <i>e</i><sub>1</sub>, with the delta rule and <i>β</i><sub>1</sub> = <i>β</i><sub>2</sub> = 1, <i>β</i><sub>3</sub> = 0.5. What does reading with <i>e</i><sub>1</sub> return?",
   "answer": 4,
   "explanation": "After two writes <i>W</i><sub>2</sub> <i>e</i><sub>1</sub> = 2 (the write under <i>e</i><sub>2</sub> does not touch it). The third adds 0.5 (6 − 2): <i>W</i><sub>3</sub> <i>e</i><sub>1</sub> = 2 + 2 = 4, half-way from the old value to the new.",
   "hint": "The delta rule adds <i>β</i><sub><i>n</i></sub> (<i>v</i><sub><i>n</i></sub> − <i>W</i><sub><i>n</i>−1</sub> <i>k</i><sub><i>n</i></sub>) <i>k</i><sub><i>n</i></sub><sup>⊤</sup>; find <i>W</i><sub>2</sub> <i>e</i><sub>1</sub> first.",
   "mistakes": [
    {
     "value": 8,
     "explanation": "2 + 6 is the sum rule, which only ever adds; the delta rule first subtracts what the key retrieves."
    },
    {
     "value": 6,
     "explanation": "With <i>β</i><sub>3</sub> = 1 the new value would replace the old; here <i>β</i><sub>3</sub> = 0.5."
    },
    {
     "value": 5,
     "explanation": "5 is <i>v</i><sub>2</sub>, stored under <i>e</i><sub>2</sub>, which is orthogonal to <i>e</i><sub>1</sub>."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why is a graph attention network's (GAT's) attention called <em>static</em>?",
   "options": [
    {
     "text": "Every receiver ranks its neighbours in the same order",
     "correct": true,
     "explanation": "LeakyReLU is increasing and the receiver's own term is shared by all its neighbours, so each receiver ranks them by <i>a</i><sub>in</sub><sup>⊤</sup> <i>W</i> <i>x</i><sub><i>n</i>′</sub>: on a complete graph every node orders the others alike."
    },
    {
     "text": "Its weights are fixed parameters, independent of the input",
     "correct": false,
     "explanation": "The scores do depend on the tokens; what is fixed is the order in which receivers rank them."
    },
    {
     "text": "Its scores ignore the receiver's features entirely",
     "correct": false,
     "explanation": "The receiver's term is in every score, but it is the same for all its neighbours, so it cannot change their order."
    },
    {
     "text": "GATv2, which moves the nonlinearity, has it too",
     "correct": false,
     "explanation": "GATv2 applies the nonlinearity before the attention vector, which is what makes its attention dynamic."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In Gaussian kernel regression, what does <i>f</i> become as the bandwidth <i>σ</i> → ∞?",
   "options": [
    {
     "text": "The mean of the samples' values, each weight 1/<i>N</i>",
     "correct": true,
     "explanation": "The bandwidth is attention's temperature; a huge <i>σ</i> makes all scores equal."
    },
    {
     "text": "Nearest-neighbour regression, the closest sample's value",
     "correct": false,
     "explanation": "That is the other limit, <i>σ</i> → 0, where the softmax picks the nearest sample."
    },
    {
     "text": "Zero everywhere, as every weight tends to zero",
     "correct": false,
     "explanation": "The weights are normalised to sum to one, so <i>f</i> stays an average of the values."
    },
    {
     "text": "An estimate that follows the farthest samples",
     "correct": false,
     "explanation": "That happens with the wrong sign in the exponent, not with a large <i>σ</i>."
    }
   ]
  }
 ],
 "12_parallel_training": [
  {
   "type": "numeric",
   "question": "Training in float32 with AdamW keeps how many bytes of state per parameter (activations aside)?",
   "answer": 16,
   "explanation": "Four numbers of 4 bytes each: the parameter, its gradient and Adam's two moment estimates, 16|<i>θ</i>| bytes in all.",
   "hint": "List what the optimiser needs per parameter, then count 4 bytes for each float32.",
   "mistakes": [
    {
     "value": 4,
     "explanation": "4 bytes hold the parameter alone; the gradient and two moments come on top."
    },
    {
     "value": 8,
     "explanation": "That counts the parameter and its gradient; Adam adds two moment estimates."
    },
    {
     "value": 12,
     "explanation": "One of the four is missing: parameter, gradient, first and second moment."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "Data parallelism over <i>G</i> = 8 devices, a model of |<i>θ</i>| = 10<sup>6</sup> parameters: how many megabytes (10<sup>6</sup> bytes) does each device send per step with a ring all-reduce?",
   "answer": 7,
   "tolerance": 0.01,
   "unit": "MB",
   "explanation": "2 · (<i>G</i>−1)/<i>G</i> · 4|<i>θ</i>| = 2 · 0.875 · 4 = 7 MB: the 4 MB of gradients go out about twice, once in the reduce-scatter and once in the all-gather.",
   "hint": "Use 2 (<i>G</i>−1)/<i>G</i> · 4|<i>θ</i>| bytes.",
   "mistakes": [
    {
     "value": 4,
     "explanation": "4 MB is the gradients once; a ring all-reduce sends each byte about twice."
    },
    {
     "value": 3.5,
     "explanation": "The factor 2 is missing: a reduce-scatter and then an all-gather."
    },
    {
     "value": 8,
     "explanation": "The factor (<i>G</i>−1)/<i>G</i> = 0.875 is missing."
    },
    {
     "value": 10.5,
     "explanation": "That is fully sharded training's three passes, not data parallelism's two."
    }
   ]
  },
  {
   "type": "choice",
   "question": "What does fully sharded data parallelism trade against plain data parallelism?",
   "options": [
    {
     "text": "Less traffic, for more memory per device",
     "correct": false,
     "explanation": "It is the opposite: it sends more (three passes instead of two) and stores less."
    },
    {
     "text": "Traffic that follows the activations instead of the parameters",
     "correct": false,
     "explanation": "That describes tensor parallelism; both data-parallel kinds send amounts set by the parameters."
    },
    {
     "text": "Memory per device divided by <i>G</i>, for 1.5 times the traffic",
     "correct": true,
     "explanation": "Each device stores 16|<i>θ</i>| / <i>G</i> bytes, and sends three passes (two all-gathers of the parameters, one reduce-scatter) instead of two."
    },
    {
     "text": "The same memory and traffic, with a different partition spec",
     "correct": false,
     "explanation": "The placement changes what each device stores: a 1/<i>G</i> slice of every parameter and moment."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Tensor parallelism splits the MLP as Megatron-LM does. How?",
   "options": [
    {
     "text": "Layer 1 by hidden units, layer 2 by input features, then one all-reduce",
     "correct": true,
     "explanation": "The GELU acts on each hidden unit alone, so each device can finish its units; the second layer then gives each device a partial sum of the output."
    },
    {
     "text": "The first layer by its input features, the second by its output features",
     "correct": false,
     "explanation": "Then each device would hold partial sums of every hidden unit, and the GELU could not be applied before summing them."
    },
    {
     "text": "Both layers by their output features, with a gather between them",
     "correct": false,
     "explanation": "That works, but gathers every hidden unit onto every device between the layers; splitting the second layer by its inputs needs only one all-reduce, at the end."
    },
    {
     "text": "Each device keeps whole layers: layer 1 on one, layer 2 on another",
     "correct": false,
     "explanation": "That is pipeline parallelism, which splits by layers and sends activations between stages; Megatron-LM splits each matrix."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In <code>shard_map</code>, the replicated parameters' gradient is already summed over devices, and the code then calls <code>pmean</code> on it. What comes out?",
   "options": [
    {
     "text": "The right gradient",
     "correct": false,
     "explanation": "Only if each device holds its own local gradient, after <code>jax.lax.pcast(..., to=&quot;varying&quot;)</code>; here the sum is already taken."
    },
    {
     "text": "<i>G</i> times the right gradient",
     "correct": true,
     "explanation": "<code>pmean</code> averages <i>G</i> equal copies of the sum and leaves the sum, which is <i>G</i> times the gradient of the mean loss. Declaring the parameters device-varying first fixes it."
    },
    {
     "text": "1/<i>G</i> times the right gradient",
     "correct": false,
     "explanation": "Averaging identical copies does not shrink them: the sum stays a sum."
    },
    {
     "text": "Each device's own local gradient",
     "correct": false,
     "explanation": "That is the other classic mistake, forgetting the reduction altogether."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Gradient accumulation cuts a batch of 32 into 4 micro-batches of 8. How does it get the whole batch's gradient?",
   "options": [
    {
     "text": "It adds the 4 mean-loss gradients",
     "correct": false,
     "explanation": "The sum is 4 times the gradient of the mean loss; the micro-batches must be averaged."
    },
    {
     "text": "It averages the 4 mean-loss gradients",
     "correct": true,
     "explanation": "The mean of the micro-batches' means is the mean over the whole batch, and gradients are linear; only one micro-batch's activations are in memory at a time."
    },
    {
     "text": "It uses one micro-batch's gradient as an estimate",
     "correct": false,
     "explanation": "One micro-batch alone gives a different gradient, as the chapter checks."
    },
    {
     "text": "It runs the 4 micro-batches on 4 devices at once",
     "correct": false,
     "explanation": "Accumulation runs the micro-batches one after another on one device; it trades time for memory."
    }
   ]
  },
  {
   "type": "choice",
   "question": "What does activation checkpointing (<code>jax.checkpoint</code>) change?",
   "options": [
    {
     "text": "The gradient, slightly, as recomputed activations round differently",
     "correct": false,
     "explanation": "The recomputed activations are the same numbers, so the gradient is unchanged."
    },
    {
     "text": "It writes the training state to disk, so that a run can resume",
     "correct": false,
     "explanation": "That is a training checkpoint; activation checkpointing concerns the forward pass's intermediate values."
    },
    {
     "text": "Only what is stored: activations are recomputed in the backward pass",
     "correct": true,
     "explanation": "About one more forward pass of arithmetic buys much less memory."
    },
    {
     "text": "It moves the activations to the host's memory until the backward pass",
     "correct": false,
     "explanation": "That is offloading; checkpointing discards the activations and recomputes them from each checkpointed segment's inputs."
    }
   ]
  }
 ],
 "13_subword_tokens": [
  {
   "type": "numeric",
   "question": "The text is five copies of the same byte, <code>aaaaa</code>. A merge of the pair <code>(a, a)</code> scans left to right. How many replacements does it make?",
   "answer": 2,
   "explanation": "The scan replaces the first two bytes, then the next two, and the fifth is left: <code>zza</code>. Overlapping pairs cannot both be merged.",
   "hint": "Scan from the left, replace a pair, and continue after it.",
   "mistakes": [
    {
     "value": 4,
     "explanation": "Four is the number of adjacent pairs; they overlap, and a byte can be merged only once."
    },
    {
     "value": 2.5,
     "explanation": "Half of five is not a whole number of replacements; the fifth byte stays."
    },
    {
     "value": 5,
     "explanation": "There are only five bytes; each replacement uses two of them."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "Byte-level BPE is trained to |𝒱| = 4,096. How many merges does it learn?",
   "answer": 3840,
   "answer_text": "3,840",
   "explanation": "The 256 bytes come first; each merge adds one token, so 4,096 − 256 = 3,840.",
   "hint": "Start from the base vocabulary of single bytes.",
   "mistakes": [
    {
     "value": 4096,
     "explanation": "The first 256 tokens are the bytes themselves, not merges."
    },
    {
     "value": 3839,
     "explanation": "Each merge adds exactly one token; no extra token is reserved here."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why start a tokeniser from bytes rather than from characters?",
   "options": [
    {
     "text": "Byte sequences are shorter than character sequences",
     "correct": false,
     "explanation": "They are at least as long, and two to four times longer for non-Latin scripts; BPE wins the length back."
    },
    {
     "text": "UTF-8 stores each character in one byte, so the two are the same",
     "correct": false,
     "explanation": "Only ASCII characters take one byte; others take two to four, and a vocabulary of the 256 byte values covers them all."
    },
    {
     "text": "Bytes line up with word boundaries, so merges stay inside words",
     "correct": false,
     "explanation": "Bytes know nothing about words; the pre-tokenising pattern is what keeps merges inside words."
    },
    {
     "text": "Bytes have 256 values: a fixed base vocabulary that covers any text",
     "correct": true,
     "explanation": "Every string is stored as UTF-8 bytes; a character vocabulary built from one corpus fails on the next one's characters."
    }
   ]
  },
  {
   "type": "choice",
   "question": "GPT-2's pattern cuts text into chunks before merging. Where does the space before a word go?",
   "options": [
    {
     "text": "With the word after it (<code> sold</code>)",
     "correct": true,
     "explanation": "So a word at the start of a line and the same word after a space are different chunks, and in practice different tokens."
    },
    {
     "text": "With the word before it",
     "correct": false,
     "explanation": "The pattern matches an optional space <em>followed by</em> letters, so the space opens the next chunk."
    },
    {
     "text": "Into a chunk of its own",
     "correct": false,
     "explanation": "Only runs of whitespace form chunks, and even then the last space goes to the next word."
    },
    {
     "text": "It is dropped, and decoding puts it back",
     "correct": false,
     "explanation": "Byte-level BPE never drops anything; decoding must give back the text exactly."
    }
   ]
  },
  {
   "type": "choice",
   "question": "How does a trained BPE tokeniser encode new text, inside one chunk?",
   "options": [
    {
     "text": "It joins the pair whose token was learned earliest, again and again",
     "correct": true,
     "explanation": "The order of the merges is the encoding rule; for GPT-2's merges this gives exactly the tokens of OpenAI's encoder."
    },
    {
     "text": "It merges the pair that is most frequent in the new text, again and again",
     "correct": false,
     "explanation": "That is the training rule; encoding replays the merges learned, by rank."
    },
    {
     "text": "It takes the longest token that matches at each position",
     "correct": false,
     "explanation": "Greedy longest match is a different tokeniser and can give other tokens."
    },
    {
     "text": "It joins the pair with the latest-learned token first",
     "correct": false,
     "explanation": "Later merges build on earlier ones, so the earliest rank goes first."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A BPE model's loss is 4.2 nats per token on a held-out text of 1,000 tokens, which hold 3,000 characters. What is its bits per character?",
   "answer": 2.0198,
   "tolerance": 0.01,
   "answer_text": "about 2.02",
   "explanation": "The text costs 4.2 × 1,000 = 4,200 nats for 3,000 characters: 1.4 nats per character, and 1.4 / ln 2 ≈ 2.02 bits per character.",
   "hint": "Find the text's total loss, divide it by the number of characters, then convert nats to bits.",
   "mistakes": [
    {
     "value": 6.0593,
     "explanation": "4.2 / ln 2 ≈ 6.06 is bits per token; a token holds three characters here, so divide by 3 as well."
    },
    {
     "value": 1.4,
     "explanation": "1.4 is nats per character; divide by ln 2 for bits."
    },
    {
     "value": 0.9704,
     "explanation": "That multiplies by ln 2; converting nats to bits divides by it."
    },
    {
     "value": 18.178,
     "explanation": "That multiplies by the three characters per token; a character carries a third of a token's loss, so divide."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why compare a character model and a BPE model in bits per character, not in loss per token?",
   "options": [
    {
     "text": "A token means a different amount of text for each tokeniser",
     "correct": true,
     "explanation": "Per character, both models are charged for the same text: the total negative log-probability divided by its number of characters."
    },
    {
     "text": "Loss per token is always lower for the character model",
     "correct": false,
     "explanation": "Predicting one of 84 characters is easier than one of 512 tokens, which is exactly why per-token losses do not compare."
    },
    {
     "text": "Bits per character do not depend on the vocabulary size",
     "correct": false,
     "explanation": "The vocabulary enters through the model's probabilities; the unit just makes the total comparable."
    },
    {
     "text": "The BPE model's loss cannot be computed per token, only per byte",
     "correct": false,
     "explanation": "It can; it just measures a different quantity from the character model's."
    }
   ]
  }
 ],
 "14_modern_transformer": [
  {
   "type": "choice",
   "question": "On a token whose features already average to zero, how do RMSNorm and LayerNorm (with unit gains and no shift) compare?",
   "options": [
    {
     "text": "They give the same output",
     "correct": true,
     "explanation": "With mean zero, LayerNorm's variance is the mean square, so both divide by the same root mean square: the chapter's test with a built-in control."
    },
    {
     "text": "RMSNorm's output is shifted by the mean",
     "correct": false,
     "explanation": "The mean is zero here, so there is nothing to shift."
    },
    {
     "text": "LayerNorm divides by a larger number",
     "correct": false,
     "explanation": "The variance about a zero mean is exactly the mean square."
    },
    {
     "text": "They always differ, since RMSNorm has no <i>β</i>",
     "correct": false,
     "explanation": "With no shift on either side, and a zero mean, the two formulas coincide."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A SwiGLU MLP has three matrices. Which hidden width <i>F</i> gives it the parameter count of a plain 4<i>D</i>-wide MLP, for <i>D</i> = 384?",
   "answer": 1024,
   "answer_text": "1,024",
   "explanation": "The plain MLP has 2 · <i>D</i> · 4<i>D</i> = 8<i>D</i><sup>2</sup> weights, SwiGLU 3<i>D</i><i>F</i>, so <i>F</i> = 8/3 <i>D</i> = 1,024.",
   "hint": "Equate 3<i>D</i><i>F</i> with 2 · <i>D</i> · 4<i>D</i>.",
   "mistakes": [
    {
     "value": 1536,
     "explanation": "4<i>D</i> would keep the width, but SwiGLU's third matrix makes it cost 1.5 times as much."
    },
    {
     "value": 768,
     "explanation": "2<i>D</i> undershoots: 3 · 2<i>D</i><sup>2</sup> = 6<i>D</i><sup>2</sup>, less than 8<i>D</i><sup>2</sup>."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "Grouped-query attention with <i>H</i> = 12 query heads and <i>H</i><sub><i>k</i><i>v</i></sub> = 4 key-value heads: by what factor is the key-value cache smaller than with 12 key-value heads?",
   "answer": 3,
   "explanation": "<i>r</i> = <i>H</i> / <i>H</i><sub><i>k</i><i>v</i></sub> = 3 query heads share each key-value head; only the cache shrinks, every head keeps its own attention matrix.",
   "hint": "Count how many query heads share one key-value head.",
   "mistakes": [
    {
     "value": 4,
     "explanation": "4 is <i>H</i><sub><i>k</i><i>v</i></sub>, the number of key-value heads kept."
    },
    {
     "value": 12,
     "explanation": "12 would be multi-query attention, <i>H</i><sub><i>k</i><i>v</i></sub> = 1."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "With QK-norm (unit gains), keys and queries of width <i>K</i> = 64 have root mean square one. What is the largest possible scaled score |<i>k</i><sup>⊤</sup> <i>q</i>| / √<i>K</i>?",
   "answer": 8,
   "explanation": "Each vector has length √<i>K</i>, so |<i>k</i><sup>⊤</sup> <i>q</i>| ≤ <i>K</i> and the scaled score is at most √<i>K</i> = 8, however large the weights become.",
   "hint": "Root mean square one means length √<i>K</i>; use Cauchy–Schwarz.",
   "mistakes": [
    {
     "value": 64,
     "explanation": "<i>K</i> = 64 bounds the unscaled score; divide by √<i>K</i>."
    },
    {
     "value": 1,
     "explanation": "One would need unit-length vectors; root mean square one means length √<i>K</i>."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Rotary positions in the interleaved layout pair (2<i>i</i>, 2<i>i</i>+1); Hugging Face's Llama code pairs (<i>i</i>, <i>i</i> + <i>K</i>/2). What follows?",
   "options": [
    {
     "text": "The two layouts give different attention, so a model must be retrained for one",
     "correct": false,
     "explanation": "A permutation applied to both keys and queries leaves every dot product as it was."
    },
    {
     "text": "The half-split layout uses other frequencies <i>ω</i><sub><i>i</i></sub> for its pairs",
     "correct": false,
     "explanation": "Both use <i>ω</i><sub><i>i</i></sub> = <i>ρ</i><sup>−2<i>i</i>/<i>K</i></sup>; only which coordinates form a pair differs."
    },
    {
     "text": "The half-split layout rotates only half of the coordinates",
     "correct": false,
     "explanation": "Every coordinate belongs to one pair, (<i>i</i>, <i>i</i> + <i>K</i>/2), and every pair is rotated."
    },
    {
     "text": "The same attention; a checkpoint's rows of <i>U</i><sub><i>q</i></sub>, <i>U</i><sub><i>k</i></sub> must match its layout",
     "correct": true,
     "explanation": "Keys and queries are permuted alike, so their dot products are unchanged; loading with the other layout needs the rows permuted."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "Newton–Schulz for Muon maps a small singular value by <i>p</i>(<i>σ</i>) ≈ 3.4445  <i>σ</i>. By about what factor do five iterations multiply a small <i>σ</i>?",
   "answer": 485,
   "tolerance": 5,
   "answer_text": "about 485",
   "explanation": "3.4445<sup>5</sup> ≈ 485: five iterations lift a singular value of a thousandth of the momentum's Frobenius norm to about one half.",
   "hint": "Each iteration multiplies a small singular value by about 3.4445.",
   "mistakes": [
    {
     "value": 17.2,
     "explanation": "That adds the five factors; the iterations compose, so they multiply."
    },
    {
     "value": 3.4445,
     "explanation": "That is one iteration; there are five."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Every block starts as the identity: <i>O</i><sub><i>h</i></sub> and the MLP's <i>W</i><sub>2</sub> (with its bias) are zero. Which weights get a zero gradient at the first step?",
   "options": [
    {
     "text": "The maps before a zero map: the query, key and value maps and <i>W</i><sub>1</sub>",
     "correct": true,
     "explanation": "∂ ℒ / ∂ <i>O</i><sub><i>h</i></sub> = Σ<sub><i>n</i></sub> (∂ ℒ / ∂ <i>y</i><sub><i>n</i></sub>) times the transpose of what head <i>h</i> gathers at <i>n</i>, is not zero, so <i>O</i><sub><i>h</i></sub> moves first, and the maps behind it follow from the second step on."
    },
    {
     "text": "All weights: a model that computes the identity cannot start learning",
     "correct": false,
     "explanation": "The zero maps themselves get a non-zero gradient, since what head <i>h</i> gathers (its weighted sum of values) is not zero."
    },
    {
     "text": "Only the zero maps <i>O</i><sub><i>h</i></sub> and <i>W</i><sub>2</sub> themselves, as their values are zero",
     "correct": false,
     "explanation": "It is the other way round: the zero maps get gradient, the maps before them do not."
    },
    {
     "text": "None: a zero output still passes gradient to the maps before it",
     "correct": false,
     "explanation": "Anything whose only way to the loss passes through a zero matrix gets zero gradient at first."
    }
   ]
  }
 ],
 "15_pretrained_model": [
  {
   "type": "choice",
   "question": "The program that wrote SmolLM2's file permuted the rows of each head's <i>U</i><sub><i>q</i></sub> and <i>U</i><sub><i>k</i></sub> for llama.cpp's rotation of neighbouring pairs. Why were the rows of <i>U</i><sub><i>v</i></sub> left as they were?",
   "options": [
    {
     "text": "They were permuted too, and the loader puts them back as well",
     "correct": false,
     "explanation": "Only <i>U</i><sub><i>q</i></sub> and <i>U</i><sub><i>k</i></sub> were permuted: the permutation matches how a rotation pairs coordinates, and values are not rotated. The loader leaves <i>U</i><sub><i>v</i></sub> alone."
    },
    {
     "text": "Only keys and queries are rotated; values never are",
     "correct": true,
     "explanation": "Rotary positions turn the keys and queries before their dot product; the values are averaged as they are, so no pairing of their coordinates exists to match."
    },
    {
     "text": "<i>U</i><sub><i>v</i></sub> is shared by a group of query heads, so its rows cannot move",
     "correct": false,
     "explanation": "Sharing sets how many value heads there are, not their row order; <i>U</i><sub><i>k</i></sub> is shared by the same groups and was permuted."
    },
    {
     "text": "Any row order of <i>U</i><sub><i>v</i></sub> gives the same output, so it does not matter",
     "correct": false,
     "explanation": "Reordering <i>U</i><sub><i>v</i></sub>'s rows reorders the values' coordinates, which <i>O</i><sub><i>h</i></sub> reads in a fixed order: the output would change unless <i>O</i><sub><i>h</i></sub>'s columns moved too."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "SmolLM2 has <i>M</i> = 30 blocks, <i>H</i><sub><i>k</i><i>v</i></sub> = 3 key-value heads and <i>K</i> = 64. How many numbers does its key-value cache hold per token?",
   "answer": 11520,
   "answer_text": "11,520",
   "explanation": "Keys and values for every key-value head of every block: 2 × 30 × 3 × 64 = 11,520.",
   "hint": "Multiply 2 (keys and values) by blocks, key-value heads and <i>K</i>.",
   "mistakes": [
    {
     "value": 5760,
     "explanation": "That stores keys or values; the cache needs both."
    },
    {
     "value": 34560,
     "explanation": "That uses all <i>H</i> = 9 query heads; grouped-query attention caches only the 3 key-value heads."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "How many MiB does SmolLM2's key-value cache take for a full context of 8,192 tokens in float32?",
   "answer": 360,
   "tolerance": 1,
   "unit": "MiB",
   "explanation": "11,520 numbers per token × 8,192 tokens × 4 bytes = 377,487,360 bytes = 360 MiB. Nine key-value heads would need 1,080 MiB.",
   "hint": "Numbers per token are 2 <i>M</i> <i>H</i><sub><i>k</i><i>v</i></sub> <i>K</i>; a MiB is 2<sup>20</sup> bytes.",
   "mistakes": [
    {
     "value": 1080,
     "explanation": "That is the cache with nine key-value heads; SmolLM2 shares three among its nine query heads."
    },
    {
     "value": 180,
     "explanation": "The factor 2 for keys and values is missing."
    },
    {
     "value": 377.5,
     "explanation": "That is in millions of bytes; a MiB is 2<sup>20</sup> bytes."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "SmolLM2's read-out is tied to its token table of 49,152 × 576 numbers. How many MiB of float32 would an untied read-out add?",
   "answer": 108,
   "tolerance": 0.6,
   "unit": "MiB",
   "explanation": "49,152 × 576 = 28,311,552 numbers, 4 bytes each: exactly 108 MiB.",
   "hint": "One more matrix the size of the table, 4 bytes per number, 2<sup>20</sup> bytes per MiB.",
   "mistakes": [
    {
     "value": 113.2,
     "explanation": "That is in millions of bytes (MB); a MiB is 2<sup>20</sup> bytes."
    },
    {
     "value": 216,
     "explanation": "That counts the table and the read-out; tying saves one of them."
    },
    {
     "value": 27,
     "explanation": "That counts one byte per number; float32 takes four."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Many of SmolLM2's heads put most of their weight on the first token. What does the chapter make of it?",
   "options": [
    {
     "text": "A habit of trained models, which park weight there: attention sinks",
     "correct": true,
     "explanation": "It is a matter of depth more than of a few heads; Xiao et al. found the same in larger models and called such tokens attention sinks."
    },
    {
     "text": "The first token carries the meaning of the whole prompt",
     "correct": false,
     "explanation": "The same happens whatever the first token says; it is where attention rests, not what the sentence means."
    },
    {
     "text": "The causal mask forces it: the first token is the one every position sees",
     "correct": false,
     "explanation": "The mask only forbids later inputs; it says nothing about how the weight is spread over the allowed ones, and the head of the first block spreads its weight over the last few tokens."
    },
    {
     "text": "It is an error introduced by the 4-bit rounding",
     "correct": false,
     "explanation": "Rounding moves each weight by at most half a step; parking is a habit of trained models, which Xiao et al. found in larger models too."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Does a confident, fluent answer from the model mean the answer is right?",
   "options": [
    {
     "text": "Yes, if decoding is greedy: the likeliest answer is the right one",
     "correct": false,
     "explanation": "Greedy decoding picks the likeliest token, which is the most typical, not the true one."
    },
    {
     "text": "Yes, once the 4-bit rounding of the weights is undone",
     "correct": false,
     "explanation": "The file cannot tell which errors the rounding causes, and small models make such errors anyway."
    },
    {
     "text": "Yes, when the prompt uses the chat template the model was tuned on",
     "correct": false,
     "explanation": "The template makes the model answer in the layout it was fine-tuned on; it does not make the content true."
    },
    {
     "text": "No: it measures how typical the text is, not whether it is true",
     "correct": true,
     "explanation": "The chapter's model states wrong facts and a wrong product in the same tone as right ones; checking against a source stays the reader's job."
    }
   ]
  }
 ],
 "16_quantisation_and_adapters": [
  {
   "type": "numeric",
   "question": "A Q8_0 block stores 32 weights as 8-bit codes plus one 16-bit scale. How many bits does it spend per weight?",
   "answer": 8.5,
   "explanation": "32 · 8 + 16 = 272 bits, 34 bytes, for 32 weights: 8.5 bits each.",
   "hint": "Add the bits of the 32 codes and of the scale, then divide by 32.",
   "mistakes": [
    {
     "value": 8,
     "explanation": "8 bits are the code alone; the shared scale adds half a bit per weight."
    },
    {
     "value": 9,
     "explanation": "That counts a 32-bit scale; Q8_0 stores its scale as a float16."
    },
    {
     "value": 5,
     "explanation": "5 bits per weight is Q4_1, four-bit codes with a scale and a minimum."
    }
   ]
  },
  {
   "type": "choice",
   "question": "A Q8_0 block's largest weight in absolute value is 0.254. What is its scale <i>d</i> (before rounding to float16), and by how much can rounding move a weight?",
   "options": [
    {
     "text": "<i>d</i> = 0.001, at most 0.0005",
     "correct": false,
     "explanation": "That divides by 254: the codes run from −127 to 127, so the largest weight gets code ±127."
    },
    {
     "text": "<i>d</i> = 0.002, at most 0.001",
     "correct": true,
     "explanation": "<i>d</i> = max |<i>x</i>| / 127 = 0.002, and a weight is rounded to the nearest multiple of <i>d</i>, at most <i>d</i>/2 away."
    },
    {
     "text": "<i>d</i> = 0.002, at most 0.002",
     "correct": false,
     "explanation": "Rounding to the nearest level never goes more than half-way to the next one."
    },
    {
     "text": "<i>d</i> = 0.254 / 255, at most <i>d</i>/2",
     "correct": false,
     "explanation": "Q8_0's codes are signed and symmetric about zero, −127 to 127; 255 levels would need a minimum as in Q4_1."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why does <i>Z</i> start at zero in a low-rank adapter <i>W</i> + (α/<i>r</i>) <i>Z</i> <i>R</i>?",
   "options": [
    {
     "text": "So that <i>R</i> receives no gradient at all during training",
     "correct": false,
     "explanation": "<i>R</i>'s gradient is zero only while <i>Z</i> = 0, at the first step; once <i>Z</i> moves, both are trained."
    },
    {
     "text": "Because a random <i>Z</i> would make <i>Z</i> <i>R</i> full-rank",
     "correct": false,
     "explanation": "<i>Z</i> <i>R</i> has rank at most <i>r</i> whatever the values: the shapes fix that."
    },
    {
     "text": "<i>R</i> starts at zero too, so that both factors start alike",
     "correct": false,
     "explanation": "<i>R</i> is drawn at random: with both factors zero, each one's gradient is a product with the other, zero, and the adapter would never move."
    },
    {
     "text": "So the adapted model starts as the pretrained one",
     "correct": true,
     "explanation": "With <i>Z</i> = 0 the update is zero, whatever <i>R</i> is; training starts from the model that was given."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A 576 × 576 projection gets an adapter of rank <i>r</i> = 8. How many numbers does the adapter train?",
   "answer": 9216,
   "answer_text": "9,216",
   "explanation": "<i>R</i> is 8 × 576 and <i>Z</i> 576 × 8: 8 × (576 + 576) = 9,216 numbers, 2.8% of the matrix's 331,776.",
   "hint": "<i>r</i> (<i>D</i><sub>out</sub> + <i>D</i><sub>in</sub>).",
   "mistakes": [
    {
     "value": 4608,
     "explanation": "That counts <i>R</i> or <i>Z</i>; the adapter trains both."
    },
    {
     "value": 331776,
     "explanation": "That is the whole matrix, what full fine-tuning would train."
    },
    {
     "value": 2654208,
     "explanation": "That is 8 × 576 × 576: the rank multiplies the sum of the sides, not their product."
    }
   ]
  },
  {
   "type": "choice",
   "question": "After training, the adapter is merged: <i>W</i>′ = <i>W</i> + (α/<i>r</i>) <i>Z</i> <i>R</i>. What does the merged model cost at inference, compared with the original?",
   "options": [
    {
     "text": "The same: one matrix of <i>W</i>'s shape per projection",
     "correct": true,
     "explanation": "The merged matrix has <i>W</i>'s shape, so each product costs what it did; only the numbers changed."
    },
    {
     "text": "Slightly more: the extra products <i>Z</i> (<i>R</i> <i>x</i>) remain",
     "correct": false,
     "explanation": "Those products are there only before merging; merging folds them into <i>W</i>′."
    },
    {
     "text": "Less: the merged matrix has rank <i>r</i>, so its products are cheaper",
     "correct": false,
     "explanation": "<i>W</i> + (α/<i>r</i>) <i>Z</i> <i>R</i> has (in general) full rank; only the update has rank <i>r</i>."
    },
    {
     "text": "Twice the memory: <i>W</i> and the update <i>Z</i> <i>R</i> are both kept",
     "correct": false,
     "explanation": "Merged, one matrix replaces <i>W</i>; keeping <i>Z</i> and <i>R</i> apart is optional (it lets one swap adapters)."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Re-quantising the file's Q4_1 weights to Q4_1 with the <i>same</i> blocks changes almost nothing, but with blocks shifted by 16 weights it changes them a lot. Why?",
   "options": [
    {
     "text": "A shifted block mixes the levels of two original blocks",
     "correct": true,
     "explanation": "Each original block is exactly <i>d</i> <i>q</i> + <i>m</i>; a block straddling two of them sees two unrelated sets of levels, which one new grid cannot hold."
    },
    {
     "text": "Shifted blocks hold weights from two different matrices of the model",
     "correct": false,
     "explanation": "Both blocks belong to one row of one matrix; what differs is their grids, <i>d</i> <i>q</i> + <i>m</i> with two unrelated <i>d</i> and <i>m</i>."
    },
    {
     "text": "Float16 rounding of <i>d</i> and <i>m</i> is worse for shifted blocks",
     "correct": false,
     "explanation": "The float16 rounding of <i>d</i> and <i>m</i> is the same kind for every block and tiny next to a step."
    },
    {
     "text": "Q4_1's rounding is random, so every pass moves the weights anew",
     "correct": false,
     "explanation": "The rounding is a fixed function of the block's values: the same blocks give the same codes, which is why the aligned pass changes almost nothing."
    }
   ]
  }
 ],
 "17_learning_from_a_verifier": [
  {
   "type": "choice",
   "question": "REINFORCE estimates the gradient of the expected reward as the mean of (<i>R</i> &minus; &mu;) &nabla; log &pi;(<i>a</i>) over sampled answers. Which baseline &mu; keeps it unbiased?",
   "options": [
    {
     "text": "Any number that does not depend on the sampled answer",
     "correct": true,
     "explanation": "Its term has expectation &mu; &Sigma;<sub>a</sub> &nabla;&pi;(<i>a</i>) = &mu; &nabla;1 = 0, whatever the number."
    },
    {
     "text": "Only &mu; = 0",
     "correct": false,
     "explanation": "Zero is unbiased, but so is every constant; a good one lowers the variance."
    },
    {
     "text": "The reward of the sampled answer itself",
     "correct": false,
     "explanation": "A baseline that depends on the answer no longer cancels: here the estimate would be zero every time."
    },
    {
     "text": "Any number, as long as it is positive and smaller than the largest reward",
     "correct": false,
     "explanation": "The sign does not matter; what matters is that it does not depend on the answer sampled."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A prompt's 4 sampled answers get rewards 1, 0, 0, 0. What is the right answer's advantage when the rewards are centred on their group's mean but not divided by their spread?",
   "answer": 0.75,
   "tolerance": 0.001,
   "explanation": "The group's mean is 1/4, so the right answer's advantage is 1 &minus; 0.25 = 0.75 (and each wrong one's &minus;0.25: they sum to zero).",
   "hint": "Subtract the mean of the four rewards.",
   "mistakes": [
    {
     "value": 1,
     "explanation": "That is the reward itself: the baseline, the group's mean, is subtracted."
    },
    {
     "value": 1.5,
     "explanation": "That divides by the standard deviation too (0.5); the question asks for the centred reward only."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In PPO's clipped objective min(&kappa; <i>A</i>, clip(&kappa;, 1 &minus; &epsilon;, 1 + &epsilon;) <i>A</i>) with <i>A</i> &gt; 0, what happens to a token whose ratio &kappa; has reached 1.5 with &epsilon; = 0.2?",
   "options": [
    {
     "text": "It still gets the full gradient <i>A</i> &nabla;&kappa;",
     "correct": false,
     "explanation": "The minimum picks the clipped term, 1.2 <i>A</i>, which does not change with &kappa;."
    },
    {
     "text": "It gets no gradient",
     "correct": true,
     "explanation": "Past 1 + &epsilon; in the direction its advantage pushes, the token stops being pushed."
    },
    {
     "text": "Its gradient changes sign, pulling &kappa; back to 1.2",
     "correct": false,
     "explanation": "The clip flattens the objective; it does not pull back. Only a KL penalty or a later batch would."
    },
    {
     "text": "The whole answer it belongs to is dropped from the batch",
     "correct": false,
     "explanation": "The clip acts token by token; the answer's other tokens keep their gradients."
    }
   ]
  },
  {
   "type": "choice",
   "question": "GRPO estimates the KL divergence to the reference with <i>k</i><sub>3</sub> = &lambda; &minus; log &lambda; &minus; 1, &lambda; = &pi;<sub>ref</sub>/&pi;, rather than with the log ratio log &pi; &minus; log &pi;<sub>ref</sub>. Why?",
   "options": [
    {
     "text": "The log ratio is biased; k<sub>3</sub> is not",
     "correct": false,
     "explanation": "Both have the exact KL as their expectation under &pi;; the chapter measured it on the enumerable policy."
    },
    {
     "text": "k<sub>3</sub> is never negative and spreads less",
     "correct": true,
     "explanation": "&lambda; &minus; 1 &ge; log &lambda;, so k<sub>3</sub> &ge; 0, and its standard deviation was a fifth of the log ratio's."
    },
    {
     "text": "k<sub>3</sub> needs no reference model",
     "correct": false,
     "explanation": "&lambda; is the reference's probability over the policy's: both models are needed."
    },
    {
     "text": "k<sub>3</sub> is cheaper to compute than a log ratio of two models",
     "correct": false,
     "explanation": "It is computed from that very log ratio, plus an exponential: cost is not the reason."
    }
   ]
  },
  {
   "type": "choice",
   "question": "The dates model trained with GRPO on the four unseen formats was never shown a right answer. What did it learn from?",
   "options": [
    {
     "text": "Nothing new: its gain on the unseen formats is zero-shot generalisation",
     "correct": false,
     "explanation": "It trained on fresh prompts in those very formats; that is learning them, not generalising to them."
    },
    {
     "text": "From the supervised model's answers, distilled",
     "correct": false,
     "explanation": "No other model took part; the reference model only enters the KL penalty."
    },
    {
     "text": "From verdicts on its own samples in those formats",
     "correct": true,
     "explanation": "Each step sampled 8 answers per prompt and weighted each by its advantage; a right one is pushed up."
    },
    {
     "text": "From the held-out test dates, which it was scored on",
     "correct": false,
     "explanation": "The prompts exclude every test date; the test sets only measure."
    }
   ]
  },
  {
   "type": "choice",
   "question": "DPO's loss depends on the policy only through the margin of two log-ratios to the reference. What can happen to the chosen answers' log-probability while the loss falls?",
   "options": [
    {
     "text": "It must rise: that is what the loss asks",
     "correct": false,
     "explanation": "The loss asks the chosen answer to rise relative to the rejected one, not in absolute terms."
    },
    {
     "text": "It can fall too",
     "correct": true,
     "explanation": "The margin grows either way; the probability taken from both goes to answers in neither list."
    },
    {
     "text": "It cannot change at all: DPO moves only the rejected answers",
     "correct": false,
     "explanation": "The gradient pushes both: up for the chosen, down for the rejected, equally in the log-probabilities."
    },
    {
     "text": "It stays where it was, at log 2 nats",
     "correct": false,
     "explanation": "log 2 is the loss's value at the start, where the policy is the reference, not a log-probability."
    }
   ]
  }
 ],
 "18_inside_a_trained_model": [
  {
   "type": "choice",
   "question": "Zero ablation of head h in block m is the same function as which edit of the model's weights?",
   "options": [
    {
     "text": "Setting the head's query and key projections to zero",
     "correct": false,
     "explanation": "Zero queries and keys make the head's attention uniform, not absent: it still writes the average of its values into the residual stream."
    },
    {
     "text": "Setting the head's output projection O<sub>h</sub> to zero",
     "correct": true,
     "explanation": "The head acts on the model only through its output V<sub>h</sub> X̄ A<sub>h</sub> = O<sub>h</sub> W<sub>h</sub> X̄ A<sub>h</sub>; with O<sub>h</sub> = 0 it writes nothing, which is what zero ablation removes."
    },
    {
     "text": "Setting the block's attention normalisation gain to zero",
     "correct": false,
     "explanation": "That silences every head of the block at once (their input becomes the shift alone), not one head."
    },
    {
     "text": "Removing the head's column from the causal mask",
     "correct": false,
     "explanation": "The mask decides which positions a head may read; it does not remove the head's output."
    }
   ]
  },
  {
   "type": "choice",
   "question": "A head writes the same vector at every position whatever the input. What do zero and mean ablation of it cost?",
   "options": [
    {
     "text": "Both cost the same, since the head carries no information",
     "correct": false,
     "explanation": "Zero ablation removes the constant too, and later blocks may rely on it; only mean ablation puts it back."
    },
    {
     "text": "Zero ablation may cost something, mean ablation costs nothing",
     "correct": true,
     "explanation": "The mean of a constant is the constant, so mean ablation changes nothing; zero ablation removes an offset that the later blocks may have learnt to expect."
    },
    {
     "text": "Mean ablation costs more, since it adds a vector the head did not write",
     "correct": false,
     "explanation": "The average over windows of a constant output is exactly what the head wrote, so nothing foreign is added."
    },
    {
     "text": "Neither can be measured, since the head's attention is not uniform",
     "correct": false,
     "explanation": "Ablation replaces the head's output; how the head attends does not matter to either measurement."
    }
   ]
  },
  {
   "type": "choice",
   "question": "On L random symbols followed by the same L again, where does an induction head at position n of the second half put its weight?",
   "options": [
    {
     "text": "On position n - L, the earlier copy of the current symbol, which it matches",
     "correct": false,
     "explanation": "That is where the current symbol was; the head wants what came next, one position later."
    },
    {
     "text": "On position n - 1, the previous symbol",
     "correct": false,
     "explanation": "That is a previous-token head, the first block's half of the circuit."
    },
    {
     "text": "On position n - L + 1, the symbol that followed the earlier copy",
     "correct": true,
     "explanation": "The symbol after the earlier copy is what comes next this time too, so copying it predicts symbol n + 1: the prefix-matching score is the weight there."
    },
    {
     "text": "Evenly on every earlier position",
     "correct": false,
     "explanation": "Uniform weights are what an untrained head does; they give a prefix-matching score of about 1/n."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A head weights the n symbols it may read equally. What is its prefix-matching score on repeated sequences with L = 2 (positions counted from 1, second half n = 3, 4)?",
   "answer": 0.2917,
   "tolerance": 0.005,
   "answer_text": "(1/3 + 1/4) / 2 ≈ 0.29",
   "explanation": "At n = 3 it puts 1/3 on each symbol, at n = 4 a quarter; the mean of the two is 7/24 ≈ 0.29.",
   "hint": "At position n it reads n symbols; average the weight 1/n over the second half.",
   "mistakes": [
    {
     "value": 0.5,
     "explanation": "That is 1/L: the head reads all n symbols up to its own position, not L of them."
    },
    {
     "value": 0.25,
     "explanation": "That is the weight at n = 4 only; the score averages over both positions of the second half."
    }
   ]
  },
  {
   "type": "choice",
   "question": "A linear probe reads line position from the residual stream at 34%, against 25% for the majority class, and the same probe solves a control task that needs only the current character at 96%. What follows?",
   "options": [
    {
     "text": "The model knows line position well: 34% is clearly above the majority class's 25%",
     "correct": false,
     "explanation": "Above the majority class says the property is there; the control shows how much more this probe could find if more were there."
    },
    {
     "text": "The property is there, weakly: a probe able to memorise characters finds little of it",
     "correct": true,
     "explanation": "The probe is flexible enough to reach 96% on a character-identity task, so its 34% on line position says the stream carries that property only weakly (Hewitt and Liang's selectivity)."
    },
    {
     "text": "The probe is broken, since it does better on the control than on the task",
     "correct": false,
     "explanation": "A control task that only needs the character is easy when the stream identifies the character; doing well on it is expected."
    },
    {
     "text": "Line position is encoded, but only non-linearly",
     "correct": false,
     "explanation": "The measurement says nothing about non-linear codes; it compares linear readability with a control."
    }
   ]
  },
  {
   "type": "choice",
   "question": "The logit lens applies the read-out after an earlier block. Why is its loss before the first block worse than a uniform guess in chapter 9's model?",
   "options": [
    {
     "text": "The embeddings carry no information about the next character",
     "correct": false,
     "explanation": "The current character says a lot about the next one (a bigram model does well); the problem is the read-out, not the information."
    },
    {
     "text": "The read-out was trained on the last block's tokens, and the embeddings are not in those coordinates",
     "correct": true,
     "explanation": "The logit lens assumes earlier blocks write in the read-out's coordinates; for the bare embeddings that assumption fails, and the lens is confidently wrong."
    },
    {
     "text": "The causal mask hides the current character from the read-out",
     "correct": false,
     "explanation": "The read-out acts on each position's own token; no mask is involved."
    },
    {
     "text": "Rotary positions have not yet been added to the tokens",
     "correct": false,
     "explanation": "Rotary positions rotate keys and queries inside attention; they are never added to the tokens."
    }
   ]
  }
 ],
 "19_speed_and_memory": [
  {
   "type": "numeric",
   "question": "A float32 matrix of 1536 × 576 weights is applied to one token. About how many FLOPs does it do per byte of weights it reads?",
   "answer": 0.5,
   "tolerance": 0.02,
   "explanation": "2 FLOPs per weight (a multiply and an add) over 4 bytes per weight: 0.5, whatever the matrix's shape.",
   "hint": "Count the FLOPs and the bytes of one weight.",
   "mistakes": [
    {
     "value": 0.25,
     "explanation": "That counts one FLOP per weight; each weight is multiplied and the product added."
    },
    {
     "value": 2,
     "explanation": "That counts one byte per weight; float32 takes four."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why does decoding one token at a time sit far to the left of the ridge point, while training sits near or right of it?",
   "options": [
    {
     "text": "Decoding reads every weight to apply it to one token; training applies each weight read to a whole batch",
     "correct": true,
     "explanation": "The intensity of a product is about 2T/b: T = 1 in decoding, T = BN in training."
    },
    {
     "text": "Decoding does more FLOPs per token than training",
     "correct": false,
     "explanation": "Training does about three times the FLOPs per token; what differs is how many tokens share one reading of the weights."
    },
    {
     "text": "Decoding runs in a lower precision than training",
     "correct": false,
     "explanation": "In float32 both read the same bytes per weight; the difference is the number of tokens per reading."
    },
    {
     "text": "The key-value cache makes decoding's matrix products larger",
     "correct": false,
     "explanation": "The cache saves recomputing old tokens; each step still applies every matrix to one new token."
    }
   ]
  },
  {
   "type": "numeric",
   "question": "A chat has four turns: each time the reader writes 20 tokens and the model replies with 30. If the cache is filled again from the whole conversation at every turn, how many tokens go through the prompt's pass in all, over the four turns?",
   "answer": 380,
   "explanation": "Turn <i>j</i>'s prompt is the <i>j</i> − 1 earlier turns and replies, 50 tokens each, and its own 20: 20 + 70 + 120 + 170 = 380. A cache kept from turn to turn passes only each turn's 20 new tokens, 80 in all; the refill's extra work grows with the square of the number of turns.",
   "hint": "Write down what the prompt of turn 1, 2, 3 and 4 holds, then add.",
   "mistakes": [
    {
     "value": 80,
     "explanation": "That is the kept cache: only each turn's new tokens. Refilling reads the earlier turns and replies again."
    },
    {
     "value": 200,
     "explanation": "That is every token of the conversation once; refilling reads the earlier ones again at every turn."
    },
    {
     "value": 500,
     "explanation": "That also counts the four replies as prompt; each reply is drawn one token at a time after the prompt's pass."
    }
   ]
  },
  {
   "type": "choice",
   "question": "What does FlashAttention's forward pass keep for the backward pass, besides its inputs and output?",
   "options": [
    {
     "text": "The N × N attention weights, in tiles",
     "correct": false,
     "explanation": "Keeping them in any arrangement is N² numbers; avoiding that is the point of the tiles."
    },
    {
     "text": "One log-sum-exp per query",
     "correct": true,
     "explanation": "ℓ_n = ŝ + log ζ recomputes any weight exactly, A = exp(s − ℓ_n), a tile at a time."
    },
    {
     "text": "The running maximum of each query's scores only",
     "correct": false,
     "explanation": "Without log ζ the recomputed weights are ζ times too large; the chapter's control shows the gradients then go wrong."
    },
    {
     "text": "Nothing: it recomputes the whole forward pass",
     "correct": false,
     "explanation": "It recomputes the weights, but needs the log-sum-exp ℓ to do so without another pass over all keys first."
    }
   ]
  },
  {
   "type": "choice",
   "question": "In the online softmax, a new tile raises a query's running maximum from ŝ_old to ŝ. What must happen to the normaliser ζ and the weighted sum ỹ accumulated so far?",
   "options": [
    {
     "text": "They are multiplied by exp(ŝ_old − ŝ)",
     "correct": true,
     "explanation": "That rescales every old term from exp(s − ŝ_old) to exp(s − ŝ), so all terms share the new maximum."
    },
    {
     "text": "Nothing; only the new tile's terms use the new maximum",
     "correct": false,
     "explanation": "Then old and new terms are measured against different maxima and the sums no longer add up."
    },
    {
     "text": "They are reset to zero and the keys read again",
     "correct": false,
     "explanation": "Rescaling makes a second pass unnecessary: the old terms are corrected by one factor."
    },
    {
     "text": "They are divided by the new maximum",
     "correct": false,
     "explanation": "The maximum enters through an exponential; the correction is the factor exp(ŝ_old − ŝ)."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Activation checkpointing wraps each block's step in jax.checkpoint. What does training then trade?",
   "options": [
    {
     "text": "Exactness of the gradients for less memory",
     "correct": false,
     "explanation": "The recomputed intermediates are the same numbers; the gradients are equal."
    },
    {
     "text": "About one more forward pass of the blocks for keeping only each block's input",
     "correct": true,
     "explanation": "The backward pass recomputes each block's intermediates from its input, so memory falls by about (M − 1) blocks' worth."
    },
    {
     "text": "More memory for fewer FLOPs",
     "correct": false,
     "explanation": "It is the other way round: it keeps less and recomputes."
    },
    {
     "text": "A smaller batch for the same memory",
     "correct": false,
     "explanation": "The batch is unchanged; the saved memory could be spent on a larger one."
    }
   ]
  }
 ],
 "20_scaling_laws": [
  {
   "type": "numeric",
   "question": "A model of 100,000 parameters trains on 2 million characters. How many training FLOPs is that by the approximation 6 |θ| 𝒟, in units of 10<sup>12</sup>?",
   "answer": 1.2,
   "tolerance": 0.02,
   "unit": "10<sup>12</sup> FLOPs",
   "explanation": "6 × 100,000 × 2,000,000 = 1.2 × 10<sup>12</sup>: two FLOPs per parameter and character forward, four backward.",
   "hint": "Multiply the parameters, the characters and the FLOPs each parameter costs per character in training.",
   "mistakes": [
    {
     "value": 0.4,
     "explanation": "That is the forward pass only, 2 FLOPs per parameter and character; the backward pass costs twice as much again."
    },
    {
     "value": 0.2,
     "explanation": "That counts one FLOP per parameter and character; a multiply and an add make two, and training is three passes' worth."
    }
   ]
  },
  {
   "type": "choice",
   "question": "The sweep fits each compute's losses with a parabola in the logarithm of the parameter count. Why the logarithm?",
   "options": [
    {
     "text": "Because the loss is measured in nats, a logarithm",
     "correct": false,
     "explanation": "The unit of the loss has nothing to do with the axis the sizes are fitted on."
    },
    {
     "text": "In log |θ| the sizes, spaced by equal factors, are evenly spread",
     "correct": true,
     "explanation": "Against |θ| itself the small sizes crowd together and the largest run steers the fit."
    },
    {
     "text": "A parabola in |θ| itself cannot have its minimum inside the range of sizes tried",
     "correct": false,
     "explanation": "It can; it would just describe these runs badly, crowded at the left and steered by the largest."
    },
    {
     "text": "It makes every compute's vertex lie at the same place",
     "correct": false,
     "explanation": "The vertices move with the compute; that movement is what the power law of the optima fits."
    }
   ]
  },
  {
   "type": "choice",
   "question": "The same runs give a different exponent u for the optimal size when the token table is left out of the parameter count. What does that say?",
   "options": [
    {
     "text": "One of the two counts is wrong",
     "correct": false,
     "explanation": "Both are counts of real parameters; they describe the same runs on two different axes."
    },
    {
     "text": "An exponent means something only together with the convention it was fitted in",
     "correct": true,
     "explanation": "For small models the table is a large, and shrinking, share of |θ|, so the axis stretches differently."
    },
    {
     "text": "The runs were too noisy to fit an exponent at all, in either of the two conventions",
     "correct": false,
     "explanation": "The bootstrap gives each convention's interval; the difference between conventions is a change of axis, not noise."
    },
    {
     "text": "The token table costs more FLOPs than the blocks",
     "correct": false,
     "explanation": "The table is a look-up and costs no FLOPs; that is why some conventions leave it out."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why does no run of the sweep read the training text more than about four times?",
   "options": [
    {
     "text": "Repeated text beyond about four passes is worth clearly less than fresh text",
     "correct": true,
     "explanation": "Muennighoff et al. found up to about four passes nearly as good as new data, and diminishing returns after."
    },
    {
     "text": "The training loop cannot start a fifth pass",
     "correct": false,
     "explanation": "The batches are drawn at random positions; nothing stops a run from reading the text many times."
    },
    {
     "text": "Four passes take the longest time the machine allows",
     "correct": false,
     "explanation": "The limit is about what the data are worth, not about time; the runs are sized in FLOPs."
    },
    {
     "text": "After four passes every model has memorised the training plays and its held-out loss rises",
     "correct": false,
     "explanation": "Small models cannot memorise millions of characters; the point is that repeats teach less than new text."
    }
   ]
  },
  {
   "type": "choice",
   "question": "With 64 windows a step, the largest models of each compute had a hundred steps or fewer, and the loss fell towards the smallest model at almost every compute. What was measured?",
   "options": [
    {
     "text": "That small models are always better for character data",
     "correct": false,
     "explanation": "With four times the steps per FLOP the same sizes gave curves with a bottom inside the runs."
    },
    {
     "text": "Mostly how many optimiser steps a model needs, not how large it should be",
     "correct": true,
     "explanation": "A run of a hundred steps is still warming up; a law of size needs runs long enough to compare sizes."
    },
    {
     "text": "That the FLOP count was wrong for large models",
     "correct": false,
     "explanation": "The hand count was checked against the compiler's; the FLOPs were right, the steps too few."
    },
    {
     "text": "That the text had run out",
     "correct": false,
     "explanation": "Those runs read the text less than twice; the data limit was far away."
    }
   ]
  },
  {
   "type": "choice",
   "question": "How do Approach 2 and Approach 3 use the same runs differently?",
   "options": [
    {
     "text": "Approach 2 uses the training loss, Approach 3 the held-out loss",
     "correct": false,
     "explanation": "Both use each run's held-out loss per character."
    },
    {
     "text": "Approach 3 needs runs at one compute only",
     "correct": false,
     "explanation": "Its formula separates size from characters only if runs at several computes are fitted together."
    },
    {
     "text": "Approach 2 reads one optimum off each compute's curve; Approach 3 fits one formula in |θ| and 𝒟 to every run",
     "correct": true,
     "explanation": "So Approach 3 also predicts the loss of any size and length, which the check of the prediction uses."
    },
    {
     "text": "They are the same fit written two ways",
     "correct": false,
     "explanation": "They give two estimates of the exponent from the same runs, and need not agree."
    }
   ]
  },
  {
   "type": "choice",
   "question": "Why was the prediction, with its tolerance, written to a file and committed before its model was trained?",
   "options": [
    {
     "text": "The training script reads its model from that file",
     "correct": false,
     "explanation": "It does, but that alone would not require committing it first."
    },
    {
     "text": "So that neither could be adjusted to the result",
     "correct": true,
     "explanation": "A check whose pass mark is chosen afterwards checks nothing; the repository's history dates the prediction."
    },
    {
     "text": "Because the fit takes hours",
     "correct": false,
     "explanation": "The fits take seconds; the point is the order of events, not their cost."
    },
    {
     "text": "So that the model's seed could be chosen to match it",
     "correct": false,
     "explanation": "That would be exactly the adjustment a prediction made first rules out; the seeds were fixed, 0 first."
    }
   ]
  }
 ]
};
