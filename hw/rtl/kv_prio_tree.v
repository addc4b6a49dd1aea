/*

pynq-kv: pipelined rule priority resolution (docs/engine.md §5.3)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Priority tree
 *
 * Among the inputs with in_valid set, finds the one with the highest
 * in_prio (unsigned); among equal priorities the lowest input index wins
 * (engine.md §5.3).  A binary tree of LEVELS = max(1, $clog2(N)) compare
 * levels, a register after every LEVELS_PER_STAGE levels and after the last
 * level: LATENCY = ceil(LEVELS / LEVELS_PER_STAGE) clock cycles, one new
 * input vector per clock, no back-pressure.  Inputs are padded to a power of
 * two with invalid leaves.
 *
 * Each node keeps its left child (lower indexes) unless the right child is
 * valid and (the left one is invalid or the right priority is strictly
 * greater), so ties keep the lower index at every level.
 *
 * The first LEVELS_PER_STAGE levels are combinational from the inputs: the
 * engine relies on that (it samples the rule priorities in the same cycle).
 */
module kv_prio_tree #
(
    // Number of inputs (rule entries): >= 1
    parameter N = 8,
    // Priority width in bits: 1 to 32
    parameter PRIO_W = 16,
    // Width of out_idx: >= max(1, $clog2(N))
    parameter IDX_W = 3,
    // Compare levels between pipeline registers: >= 1
    parameter LEVELS_PER_STAGE = 2
)
(
    input  wire                clk,

    input  wire [N-1:0]        in_valid,
    input  wire [N*PRIO_W-1:0] in_prio,

    output wire                out_valid,
    output wire [IDX_W-1:0]    out_idx,
    output wire [PRIO_W-1:0]   out_prio
);

// compare levels and padded leaf count
localparam LEVELS = (N > 1) ? $clog2(N) : 1;
localparam NP = 2**LEVELS;
// node: {valid, prio, idx}
localparam NIDX_W = LEVELS;
localparam NODE_W = 1 + PRIO_W + NIDX_W;

// check configuration
initial begin
    if (N < 1) begin
        $error("Error: N must be at least 1 (instance %m)");
        $finish;
    end
    if (PRIO_W < 1 || PRIO_W > 32) begin
        $error("Error: PRIO_W must be 1 to 32 (instance %m)");
        $finish;
    end
    if (IDX_W < LEVELS) begin
        $error("Error: IDX_W must be at least max(1, $clog2(N)) (instance %m)");
        $finish;
    end
    if (LEVELS_PER_STAGE < 1) begin
        $error("Error: LEVELS_PER_STAGE must be at least 1 (instance %m)");
        $finish;
    end
end

// heap-ordered nodes: node 1 is the root, node i has children 2i and 2i+1,
// leaves are NP .. 2NP-1 (leaf NP+k is input k); node 0 is unused
/* verilator lint_off UNOPTFLAT */
// (one vector holds every level; the dependencies between its bits are a tree, not a loop)
wire [2*NP*NODE_W-1:0] nodes;
/* verilator lint_on UNOPTFLAT */

assign nodes[0 +: NODE_W] = {NODE_W{1'b0}};

genvar i;

generate
    for (i = 0; i < NP; i = i + 1) begin : leaf
        localparam [NIDX_W-1:0] IDX = i;
        if (i < N) begin : used
            assign nodes[(NP+i)*NODE_W +: NODE_W] = {in_valid[i], in_prio[i*PRIO_W +: PRIO_W], IDX};
        end else begin : pad
            assign nodes[(NP+i)*NODE_W +: NODE_W] = {1'b0, {PRIO_W{1'b0}}, IDX};
        end
    end

    for (i = 1; i < NP; i = i + 1) begin : node
        // height of this node above the leaves: 1 .. LEVELS
        localparam HEIGHT = LEVELS - $clog2(i + 1) + 1;

        wire [NODE_W-1:0] left = nodes[(2*i)*NODE_W +: NODE_W];
        wire [NODE_W-1:0] right = nodes[(2*i+1)*NODE_W +: NODE_W];
        wire left_valid = left[NODE_W-1];
        wire right_valid = right[NODE_W-1];
        wire [PRIO_W-1:0] left_prio = left[NIDX_W +: PRIO_W];
        wire [PRIO_W-1:0] right_prio = right[NIDX_W +: PRIO_W];
        wire take_right = right_valid && (!left_valid || right_prio > left_prio);
        wire [NODE_W-1:0] best = take_right ? right : left;

        if (HEIGHT % LEVELS_PER_STAGE == 0 || HEIGHT == LEVELS) begin : pipe
            reg [NODE_W-1:0] best_reg;
            always @(posedge clk) begin
                best_reg <= best;
            end
            assign nodes[i*NODE_W +: NODE_W] = best_reg;
        end else begin : comb
            assign nodes[i*NODE_W +: NODE_W] = best;
        end
    end
endgenerate

assign out_valid = nodes[2*NODE_W-1];
assign out_prio = nodes[NODE_W+NIDX_W +: PRIO_W];
generate
    if (IDX_W > NIDX_W) begin : idx_ext
        assign out_idx = {{(IDX_W-NIDX_W){1'b0}}, nodes[NODE_W +: NIDX_W]};
    end else begin : idx_same
        assign out_idx = nodes[NODE_W +: NIDX_W];
    end
endgenerate

endmodule

`resetall
