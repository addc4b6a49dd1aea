/*

pynq-kv: per-way H3 hash of a key (docs/engine.md §3)

*/

// Language: Verilog 2005

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * H3 hash unit
 *
 * Computes row_w(k) = H_w(k) mod 2^ROW_BITS for every way w of the exact
 * table, one key per clock, fixed latency of STAGES clock cycles, no
 * back-pressure.  An opaque user/tag bus travels alongside each key.
 *
 * H_w is a GF(2)-linear map: output bit j of way w is the XOR of the key
 * bits i whose matrix word Q_w[i] has bit j set.  The matrix is computed at
 * elaboration time from HASH_SEED by constant functions that mirror
 * engine.md §3 (xorshift64 generator, per-way state, Q_w[i] = state >> 32),
 * so the seed is a real parameter: nothing is copied from a generator
 * script.
 *
 * Pipeline: the key is zero-extended to KEY_PAD = FANIN^STAGES bits, FANIN
 * being the smallest integer >= 2 with FANIN^STAGES >= KEY_W (FANIN = KEY_W
 * for STAGES = 1).  Each output bit is a FANIN-ary XOR tree with STAGES
 * levels and a register after every level: stage 1 XORs FANIN masked key
 * bits into each of FANIN^(STAGES-1) registers, stage s XORs FANIN
 * registers of stage s-1.  Terms that are constant zero (padding, matrix
 * zeros) are removed by synthesis.  About half of the key bits survive the
 * matrix mask, so stage 1 has ~FANIN/2 real inputs per register; stage s > 1
 * has FANIN.  With 6-input LUTs, up to ~36 real inputs are two LUT levels:
 *
 *   KEY_W   STAGES  FANIN  stage-1 inputs  later stages
 *    144      2       12        ~6             12
 *    288      2       17        ~9             17
 *    576      2       24       ~12             24
 *   1152      2       34       ~17             34
 *   1152      3       11        ~6             11
 *
 * Flip-flops: WAYS*ROW_BITS*(sum over s of FANIN^(STAGES-s)) for the trees
 * (fewer after synthesis removes constant ones) plus STAGES*(1+USER_W).
 *
 * Latency: m_valid/m_rows/m_user appear exactly STAGES clock cycles after
 * s_valid/s_key/s_user are sampled (LATENCY = STAGES).
 *
 * m_rows packs the ways: way w's row is m_rows[w*ROW_BITS +: ROW_BITS].
 * Key bit i is s_key[i] (bit 0 = least significant bit of the raw key).
 */
module kv_h3_hash #
(
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Number of ways (hash banks), each with its own hash function: 2 to 8
    parameter WAYS = 4,
    // Row index width in bits, log2(ROWS): 1 to 24
    parameter ROW_BITS = 13,
    // 64-bit seed of the hash family (engine.md §1 HASH_SEED)
    parameter [63:0] HASH_SEED = 64'h70796E712D6B7631,
    // Pipeline stages of the XOR trees, equal to the latency in cycles: 1 to 6
    parameter STAGES = 2,
    // Width of the user/tag bus carried alongside each key: >= 1
    // (tie s_user off and leave m_user open if unused)
    parameter USER_W = 1
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * Key input (one key per clock when s_valid is high)
     */
    input  wire                      s_valid,
    input  wire [KEY_W-1:0]          s_key,
    input  wire [USER_W-1:0]         s_user,

    /*
     * Row output, STAGES cycles later
     */
    output wire                      m_valid,
    output wire [WAYS*ROW_BITS-1:0]  m_rows,
    output wire [USER_W-1:0]         m_user
);

// multiplier of the per-way state (engine.md §3 step 2)
localparam [63:0] GOLDEN64 = 64'h9E3779B97F4A7C15;

// number of output bits, all ways
localparam NB = WAYS*ROW_BITS;

// smallest FANIN >= 2 with FANIN^STAGES >= KEY_W (FANIN = KEY_W for one stage)
function integer calc_fanin(input integer dummy);
    integer f, p, k;
    begin
        calc_fanin = KEY_W;
        if (STAGES > 1) begin
            // descending, so the last hit is the smallest; 64^2 >= 4096 > KEY_W
            for (f = 64; f >= 2; f = f - 1) begin
                p = 1;
                for (k = 0; k < STAGES; k = k + 1) begin
                    if (p < KEY_W) begin
                        p = p * f;
                    end
                end
                if (p >= KEY_W) begin
                    calc_fanin = f;
                end
            end
        end
        calc_fanin = calc_fanin + 0*dummy;
    end
endfunction

localparam FANIN = calc_fanin(0);

// FANIN^e
function integer fanin_pow(input integer e);
    integer k;
    begin
        fanin_pow = 1;
        for (k = 0; k < e; k = k + 1) begin
            fanin_pow = fanin_pow * FANIN;
        end
    end
endfunction

// key width padded to a full tree
localparam KEY_PAD = fanin_pow(STAGES);

// registers per output bit after stage s (1 .. STAGES)
function integer stage_terms(input integer s);
    begin
        stage_terms = fanin_pow(STAGES - s);
    end
endfunction

// offset of stage s in one output bit's tree register vector
function integer stage_offset(input integer s);
    integer t;
    begin
        stage_offset = 0;
        for (t = 1; t < s; t = t + 1) begin
            stage_offset = stage_offset + stage_terms(t);
        end
    end
endfunction

// tree registers per output bit, all stages (the last one is the output bit)
localparam TREE_W = stage_offset(STAGES + 1);

// initial generator state of way w, engine.md §3 step 2:
// HASH_SEED ^ ((w + 1) * GOLDEN64 mod 2^64), 0 replaced by GOLDEN64;
// the product is a sum of w + 1 terms (w < 8), so no tool needs a
// 64-bit multiplier at elaboration time
function [63:0] way_state(input integer way);
    integer k;
    reg [63:0] acc;
    begin
        acc = 64'd0;
        for (k = 0; k <= way; k = k + 1) begin
            acc = acc + GOLDEN64;
        end
        acc = HASH_SEED ^ acc;
        if (acc == 64'd0) begin
            acc = GOLDEN64;
        end
        way_state = acc;
    end
endfunction

// column j of way w's H3 matrix, engine.md §3 step 3:
// bit i is bit j of Q_w[i] = (i+1-th xorshift64 state) >> 32; zero beyond KEY_W
function [KEY_PAD-1:0] h3_column(input integer way, input integer j);
    integer i;
    reg [63:0] s;
    reg [KEY_PAD-1:0] col;
    begin
        s = way_state(way);
        col = {KEY_PAD{1'b0}};
        for (i = 0; i < KEY_W; i = i + 1) begin
            // xorshift64 (13, 7, 17), engine.md §3 step 1; written inline
            // because Yosys evaluates a nested constant-function call per
            // iteration several times slower
            s = s ^ (s << 13);
            s = s ^ (s >> 7);
            s = s ^ (s << 17);
            col[i] = s[32+j];
        end
        h3_column = col;
    end
endfunction

// check configuration
initial begin
    if (KEY_W != 144 && KEY_W != 288 && KEY_W != 576 && KEY_W != 1152) begin
        $error("Error: KEY_W must be 144, 288, 576 or 1152 (instance %m)");
        $finish;
    end

    if (WAYS < 2 || WAYS > 8) begin
        $error("Error: WAYS must be 2 to 8 (instance %m)");
        $finish;
    end

    if (ROW_BITS < 1 || ROW_BITS > 24) begin
        $error("Error: ROW_BITS must be 1 to 24 (instance %m)");
        $finish;
    end

    if (STAGES < 1 || STAGES > 6) begin
        $error("Error: STAGES must be 1 to 6 (instance %m)");
        $finish;
    end

    if (USER_W < 1) begin
        $error("Error: USER_W must be at least 1 (instance %m)");
        $finish;
    end
end

// key, zero-extended to the padded tree width
wire [KEY_PAD-1:0] key_pad;

generate
    if (KEY_PAD > KEY_W) begin : pad
        assign key_pad = {{(KEY_PAD-KEY_W){1'b0}}, s_key};
    end else begin : nopad
        assign key_pad = s_key;
    end
endgenerate

reg [STAGES-1:0] valid_reg;
reg [STAGES*USER_W-1:0] user_reg;

assign m_valid = valid_reg[STAGES-1];
assign m_user = user_reg[(STAGES-1)*USER_W +: USER_W];

integer k;

always @(posedge clk) begin
    valid_reg[0] <= s_valid;
    user_reg[0 +: USER_W] <= s_user;
    for (k = 1; k < STAGES; k = k + 1) begin
        valid_reg[k] <= valid_reg[k-1];
        user_reg[k*USER_W +: USER_W] <= user_reg[(k-1)*USER_W +: USER_W];
    end

    if (rst) begin
        valid_reg <= {STAGES{1'b0}};
    end
end

genvar b, s, c;

generate
    for (b = 0; b < NB; b = b + 1) begin : out_bit
        // matrix column of this output bit: way b / ROW_BITS, bit b % ROW_BITS
        localparam [KEY_PAD-1:0] COLUMN = h3_column(b / ROW_BITS, b % ROW_BITS);

        // XOR tree of this output bit, stage s at stage_offset(s)
        // (one vector per output bit and constant part-selects keep Icarus fast)
        wire [TREE_W-1:0] tree_next;
        reg  [TREE_W-1:0] tree_reg;

        // stage 1: FANIN masked key bits per register
        for (c = 0; c < stage_terms(1); c = c + 1) begin : term
            assign tree_next[c] = ^(key_pad[c*FANIN +: FANIN] & COLUMN[c*FANIN +: FANIN]);
        end

        // stages 2 .. STAGES: FANIN registers of the previous stage per register
        for (s = 2; s <= STAGES; s = s + 1) begin : stage
            for (c = 0; c < stage_terms(s); c = c + 1) begin : term
                assign tree_next[stage_offset(s) + c] =
                    ^tree_reg[stage_offset(s-1) + c*FANIN +: FANIN];
            end
        end

        always @(posedge clk) begin
            tree_reg <= tree_next;
        end

        assign m_rows[b] = tree_reg[TREE_W-1];
    end
endgenerate

endmodule

`resetall
